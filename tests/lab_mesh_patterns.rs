//! `rdmabench mesh --pattern` in the one-guest lab (docs/mesh.md#traffic-patterns): four
//! ranks over rxe0, the pairs' rounds, then incast into each rank in turn and two random
//! bisections, every flow of a round at once. The JSON's rounds hold the pattern's links
//! (N−1 senders into one receiver; half the ranks into the other half), and each round's
//! aggregate and alone sum are the sums of its links' figures, alone being the pairs'
//! matrix; each flow runs 2 s (`--pattern-secs`' default), and every round has a shared window
//! whose flows' bytes add up, and a latency under load. No timing is judged: four ranks
//! share two vCPUs.

mod common;

use std::time::Duration;

use common::{err, finish, read_json, text};

const LIMIT: Duration = Duration::from_secs(600);

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_mesh_incast_and_bisection_rounds_add_up_over_rxe0() {
    let _ = common::rdmabench(true);
    let dir = common::scratch("rdmabench-mesh-patterns");
    let (json, html) = (dir.join("mesh.json"), dir.join("mesh.html"));
    let out = finish(
        common::mpirun(
            4,
            &[
                "mesh",
                "-n",
                "20",
                "--pattern",
                "incast,bisection",
                "--bisection-rounds",
                "2",
                "--json",
                json.to_str().unwrap(),
                "--html",
                html.to_str().unwrap(),
            ],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let doc = read_json(&json, &out);
    // The patterns fail nothing without --min-pattern-ratio; a link of the pairs'
    // rounds confirmed slow alone would (exit 1), an error never may.
    let confirmed = doc["findings"].as_array().unwrap().iter().any(|f| f["confirmed"] == true);
    assert_eq!(out.status.code(), Some(i32::from(confirmed)), "{}\n{}", text(&out), err(&out));
    assert_eq!(doc["complete"], true, "{doc}");
    assert_eq!(doc["analysis"]["measured_links"], 12, "the pairs' 12 links alone");
    common::patterns::assert_patterns_add_up(&doc, 4, 4, 2);
    for r in doc["patterns"]["results"].as_array().unwrap() {
        let hosts = r["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "one guest, one device: {r}");
        assert_eq!(hosts[0]["device"], "rxe0");
    }
    assert!(doc["patterns"]["bw_test"].as_str().unwrap().starts_with("write_bw 64K, 2 s"), "{doc}");
    let table = text(&out);
    assert!(table.contains("then incast, bisection: 6 pattern round(s)"), "{table}");
    assert_eq!(table.matches(" pattern round ").count(), 6, "{table}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("class=\"aggregate\"").count(), 6, "a bar per round");
}
