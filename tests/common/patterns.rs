//! What a mesh's JSON must say of its traffic patterns (`--pattern`, docs/mesh.md#traffic-patterns),
//! whatever the transport: each round's links are the pattern's, and its figures add up.

use serde_json::Value;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn ranks(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|r| r.as_u64().unwrap()).collect()
}

/// `doc` (a mesh of `n` ranks, `--pairs all`, every flow measured) ran `incast` rounds
/// of incast and `bisection` of bisection, and each round's links, sums and ratio add
/// up: the aggregate is the sum of its links at once, the alone sum that of the same
/// links in the pairs' matrix, every host's flows are the round's.
pub fn assert_patterns_add_up(doc: &Value, n: u64, incast: u64, bisection: u64) {
    let p = &doc["patterns"];
    assert_eq!(p["seed"], doc["seed"], "bisection's seed is the mesh's");
    assert_eq!(p["rounds"].as_u64(), Some(incast + bisection), "{p}");
    let results = p["results"].as_array().unwrap();
    assert_eq!(results.len() as u64, incast + bisection, "every round ended: {p}");
    let matrix = &doc["analysis"]["bw"];
    let mut roots = Vec::new();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["round"].as_u64(), Some(i as u64 + 1), "{r}");
        let links = r["links"].as_array().unwrap();
        let pairs: Vec<(u64, u64)> = links
            .iter()
            .map(|l| (l["from"].as_u64().unwrap(), l["to"].as_u64().unwrap()))
            .collect();
        match r["pattern"].as_str().unwrap() {
            "incast" => {
                let root = r["root"].as_u64().unwrap();
                roots.push(root);
                let want: Vec<(u64, u64)> =
                    (0..n).filter(|&s| s != root).map(|s| (s, root)).collect();
                assert_eq!(pairs, want, "N-1 senders into {root}: {r}");
            }
            "bisection" => {
                let (senders, receivers) = (ranks(&r["senders"]), ranks(&r["receivers"]));
                assert_eq!((senders.len() as u64, receivers.len() as u64), (n / 2, n / 2), "{r}");
                assert!(senders.iter().all(|s| !receivers.contains(s)), "disjoint halves: {r}");
                assert_eq!(pairs.len() as u64, n / 2, "{r}");
                for (from, to) in &pairs {
                    assert!(senders.contains(from) && receivers.contains(to), "{r}");
                }
                assert_eq!(r["idle"].is_null(), n % 2 == 0, "{r}");
            }
            other => panic!("pattern {other} was not asked for: {r}"),
        }
        let (mut together, mut alone) = (0.0, 0.0);
        for l in links {
            assert!(l["error"].is_null(), "{l}");
            let bw = l["bw_mb_per_sec"].as_f64().unwrap();
            let solo = l["alone_mb_per_sec"].as_f64().unwrap();
            let (from, to) =
                (l["from"].as_u64().unwrap() as usize, l["to"].as_u64().unwrap() as usize);
            assert_eq!(matrix[from][to].as_f64(), Some(solo), "alone is the matrix's figure: {l}");
            // A flow may be starved for its whole window (four ranks on two vCPUs): 0.
            assert!(bw >= 0.0 && close(l["ratio"].as_f64().unwrap(), bw / solo), "{l}");
            together += bw;
            alone += solo;
        }
        let t = &r["total"];
        assert_eq!(t["links"].as_u64(), Some(links.len() as u64), "{t}");
        assert_eq!(t["links_alone"], t["links"], "--pairs all: every link alone too: {t}");
        assert!(close(t["aggregate_mb_per_sec"].as_f64().unwrap(), together), "{t}");
        assert!(close(t["alone_sum_mb_per_sec"].as_f64().unwrap(), alone), "{t}");
        assert!(close(t["ratio"].as_f64().unwrap(), together / alone), "{t}");
        let hosts = r["hosts"].as_array().unwrap();
        let sent: u64 = hosts.iter().map(|h| h["sent"]["links"].as_u64().unwrap()).sum();
        let received: u64 = hosts.iter().map(|h| h["received"]["links"].as_u64().unwrap()).sum();
        assert_eq!((sent, received), (links.len() as u64, links.len() as u64), "{r}");
        assert_eq!(r["pass"], true, "no --min-pattern-ratio: {r}");
        assert_window_adds_up(r);
    }
    roots.sort_unstable();
    if incast == n {
        assert_eq!(roots, (0..n).collect::<Vec<_>>(), "incast into every rank in turn");
    }
}

/// Round `r`'s shared window (docs/mesh.md#the-shared-window): every flow's bytes
/// between the last flow's start and the first flow's stop, which each flow straddles;
/// its length and every flow's bytes inside it are reported and add up to the aggregate,
/// the shares to 1, and Jain's index is the flows' bytes'.
pub fn assert_window_adds_up(r: &Value) {
    let w = &r["window"];
    assert!(r["no_window"].is_null(), "every flow ran at once for a while: {r}");
    let links = r["links"].as_array().unwrap();
    let (start, stop, length) = (
        w["start_ms"].as_f64().unwrap(),
        w["stop_ms"].as_f64().unwrap(),
        w["length_ms"].as_f64().unwrap(),
    );
    assert!(start >= 0.0 && stop > start && close(length, stop - start), "{w}");
    assert_eq!(w["flows"].as_u64(), Some(links.len() as u64), "{w}");
    let bytes: Vec<f64> = links.iter().map(|l| l["window_bytes"].as_f64().unwrap()).collect();
    let total: f64 = bytes.iter().sum();
    assert!(bytes.iter().all(|&b| b >= 0.0) && total > 0.0, "bytes moved inside: {r}");
    assert!(close(w["bytes"].as_f64().unwrap(), total), "{w}");
    let mib = 1024.0 * 1024.0;
    let aggregate = total / (length / 1e3) / mib;
    assert!(
        (w["aggregate_mb_per_sec"].as_f64().unwrap() - aggregate).abs() <= 1e-3 * aggregate,
        "{w}"
    );
    let shares: f64 = links.iter().map(|l| l["share"].as_f64().unwrap()).sum();
    assert!(close(shares, 1.0), "the shares: {r}");
    for (l, b) in links.iter().zip(&bytes) {
        let rate = b / (length / 1e3) / mib;
        assert!((l["window_mb_per_sec"].as_f64().unwrap() - rate).abs() <= 1e-3 * rate, "{l}");
    }
    let squares: f64 = bytes.iter().map(|b| b * b).sum();
    let jain = total * total / (bytes.len() as f64 * squares);
    assert!(close(w["fairness"].as_f64().unwrap(), jain), "{w}");
    let alone = r["total"]["alone_sum_mb_per_sec"].as_f64().unwrap();
    assert!(close(w["alone_sum_mb_per_sec"].as_f64().unwrap(), alone), "{w}");
    assert!(
        close(w["ratio"].as_f64().unwrap(), w["aggregate_mb_per_sec"].as_f64().unwrap() / alone),
        "{w}"
    );
    // The latency probe ran beside the flows on the first flow's link.
    let p = &r["probe"];
    assert_eq!((&p["from"], &p["to"]), (&links[0]["from"], &links[0]["to"]), "{r}");
    let (under, solo) = (p["t_typical_usec"].as_f64().unwrap(), p["alone_usec"].as_f64().unwrap());
    assert!(under > 0.0 && solo > 0.0 && close(p["ratio"].as_f64().unwrap(), under / solo), "{p}");
}
