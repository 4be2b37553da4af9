//! Shell completions and man pages, both generated from the clap definition so they
//! never drift from the flags: `rdmabench completions SHELL`, and the hidden
//! `rdmabench manpages DIR` that ci/package runs.

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
        std::fs::write(&path, roff).map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
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
