//! Shell completions and man pages, both generated from the clap definition so they
//! never drift from the flags: `rdmabench completions SHELL`, and the hidden
//! `rdmabench manpages DIR` that ci/package runs. The pages' EXAMPLES are the command
//! lines of the docs' `sh` blocks, so they never drift from the docs either.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Writes `shell`'s completion script for every subcommand and flag to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<(), Error> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut super::definition(), "rdmabench", &mut script);
    out.write_all(&script).map_err(|e| Error::io(format!("writing the completions: {e}")))
}

/// Writes `rdmabench.1` and `rdmabench-SUBCOMMAND.1` for each visible subcommand into
/// `dir`; returns the files written.
///
/// # Errors
/// A directory or file that cannot be written.
pub fn manpages(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let io =
        |what: &Path, e: std::io::Error| Error::io(format!("cannot write {}: {e}", what.display()));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut top = super::definition();
    top.build();
    let mut pages = vec![("rdmabench".to_string(), top.clone())];
    // clap's own `help` subcommand needs no page.
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let name = format!("rdmabench-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    let mut written = Vec::with_capacity(pages.len());
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff).map_err(|e| io(&path, e))?;
        roff.extend_from_slice(closing_sections(&name).as_bytes());
        std::fs::write(&path, roff).map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

/// The docs whose `sh` blocks hold the command lines the pages show as EXAMPLES.
const DOCS: [&str; 7] = [
    include_str!("../../README.md"),
    include_str!("../../docs/compare.md"),
    include_str!("../../docs/lab.md"),
    include_str!("../../docs/packaging.md"),
    include_str!("../../docs/protocol.md"),
    include_str!("../../docs/qualify.md"),
    include_str!("../../docs/security.md"),
];

/// Most examples on one page.
const MAX_EXAMPLES: usize = 8;

/// The command lines of the docs' `sh` blocks that run `rdmabench SUBCOMMAND`.
fn examples(subcommand: &str) -> Vec<String> {
    // `rdmabench SUBCOMMAND` as the command, or what an MPI launcher starts.
    let runs = |line: &str| {
        line.split_once(&format!("rdmabench {subcommand}")).is_some_and(|(before, rest)| {
            let launched = ["mpirun ", "srun "].iter().any(|l| before.starts_with(l));
            (before.is_empty() || launched) && (rest.is_empty() || rest.starts_with(' '))
        })
    };
    let mut found: Vec<String> = Vec::new();
    for doc in DOCS {
        let mut in_sh = false;
        let command = |l: &str| l.split('#').next().unwrap_or("").trim().to_string();
        for line in doc.lines() {
            // The docs run a fresh build's binary at times; the page, the installed one.
            let line = line.replace("target/release/rdmabench", "rdmabench");
            if line.starts_with("```") {
                in_sh = line == "```sh";
            } else if in_sh && runs(&line) && !found.iter().any(|f| command(f) == command(&line)) {
                found.push(line);
            }
        }
    }
    found.truncate(MAX_EXAMPLES);
    found
}

/// EXAMPLES (a test without its own in the docs: write-bw's server and client, as
/// every perftest-style test starts alike), EXIT STATUS and SEE ALSO, in roff.
fn closing_sections(page: &str) -> String {
    let subcommand = page.strip_prefix("rdmabench-");
    let mut lines = match subcommand {
        Some(sub) => examples(sub),
        None => ["devices", "write-bw", "tcp-bw", "serve", "compare", "doctor"]
            .iter()
            .filter_map(|sub| examples(sub).into_iter().next())
            .collect(),
    };
    let perftest_style = subcommand.is_some_and(|s| s.ends_with("-bw") || s.ends_with("-lat"));
    if let (true, true, Some(sub)) = (lines.is_empty(), perftest_style, subcommand) {
        let pair = examples("write-bw").into_iter().take(2).zip(["# server", "# client"]);
        lines = pair
            .map(|(l, role)| format!("{}  {role}", l.split('#').next().unwrap_or("").trim()))
            .map(|l| l.replace("write-bw", sub))
            .collect();
    }
    let mut roff = String::new();
    if !lines.is_empty() {
        roff.push_str(".SH EXAMPLES\n.nf\n");
        for line in &lines {
            roff.push_str(&roff_line(line));
        }
        roff.push_str(".fi\n");
    }
    roff.push_str(concat!(
        ".SH \"EXIT STATUS\"\n",
        ".TP\n0\nThe command ran and every threshold held.\n",
        ".TP\n1\nA verdict failed: \\-\\-min\\-bw (\\-w), \\-y, \\-\\-max\\-lat or \\-\\-validate; ",
        "doctor found a FAIL; qualify failed or regressed.\n",
        ".TP\n2\nAn error, named in one line on stderr: bad flags, no device, a peer missing, ",
        "wrong or gone, a file that cannot be written.\n",
        ".TP\n130, 143\nA test's client stopped by SIGINT (Ctrl\\-C) or SIGTERM, its results so far ",
        "printed and written.\n",
    ));
    roff.push_str(".SH \"SEE ALSO\"\n");
    let mut see = vec!["rdmabench(1)".to_string()];
    if subcommand.is_none() {
        see.clear();
    }
    see.extend(["ib_write_bw(1)", "iperf3(1)", "qperf(1)"].map(String::from));
    roff.push_str(&format!("{}\n.PP\n", see.join(", ")));
    roff.push_str(
        "/usr/share/doc/rdmabench/README.md and /usr/share/doc/rdmabench/docs/ \\(em every flag, \
         the JSON, the metrics, the lab.\n",
    );
    roff
}

/// One line of text as roff shows it verbatim: backslashes and dashes escaped, a
/// leading dot or quote kept from reading as a request.
fn roff_line(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    let guard = if escaped.starts_with(['.', '\'']) { "\\&" } else { "" };
    format!("{guard}{escaped}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_subcommand_gets_a_page() {
        let dir = std::env::temp_dir().join(format!("rdmabench-man-{}", std::process::id()));
        let pages = manpages(&dir).unwrap();
        let names: Vec<String> =
            pages.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for want in [
            "rdmabench.1",
            "rdmabench-write-bw.1",
            "rdmabench-compare.1",
            "rdmabench-completions.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
        assert!(
            !names.iter().any(|n| n == "rdmabench-manpages.1"),
            "the hidden command has no page"
        );
        let write_bw = std::fs::read_to_string(dir.join("rdmabench-write-bw.1")).unwrap();
        assert!(
            write_bw.starts_with(".ie") || write_bw.contains(".TH rdmabench-write-bw"),
            "{write_bw}"
        );
        assert!(write_bw.contains("report_gbits"), "the flags are on the page");
        let examples = write_bw.split(".SH EXAMPLES").nth(1).expect("EXAMPLES");
        assert!(examples.contains("rdmabench write\\-bw \\-d mlx4_0 192.168.1.10"), "{examples}");
        assert!(write_bw.contains(".SH \"EXIT STATUS\"") && write_bw.contains(".SH \"SEE ALSO\""));
        // A test the docs show no command of: write-bw's server and client, renamed.
        let atomic = std::fs::read_to_string(dir.join("rdmabench-atomic-lat.1")).unwrap();
        assert!(atomic.contains("rdmabench atomic\\-lat \\-d mlx4_0"), "{atomic}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn completions_name_the_subcommands() {
        let mut bash = Vec::new();
        completions(clap_complete::Shell::Bash, &mut bash).unwrap();
        let bash = String::from_utf8(bash).unwrap();
        assert!(bash.contains("complete -F _rdmabench") && bash.contains("write-bw"), "{bash}");
        let mut fish = Vec::new();
        completions(clap_complete::Shell::Fish, &mut fish).unwrap();
        assert!(String::from_utf8(fish).unwrap().contains("complete -c rdmabench"));
    }
}
