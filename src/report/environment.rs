//! What was tested, as HTML: every side's environment in one table, and what changed
//! against a baseline, for every report page (qualify, compare, mesh).

use std::fmt::Write;

use super::svg::escape;
use crate::environment::{Environment, ABSENT};

/// The environments of a report's sides as one `<table id="ID">`: a row per field of
/// [`Environment::fields`] (host, kernel, device, model, board id, firmware, driver,
/// rdma-core, link layer, rate, active MTU, PCIe, NUMA node, …), a column per side
/// (`this host`, `server`, `baseline this host`). A side that is not known shows `-`; a
/// row that no side knows is left out. A cell whose value differs from the row's first
/// column is marked `class="changed"`.
pub fn environment_table(id: &str, sides: &[(&str, Option<&Environment>)]) -> String {
    let columns: Vec<Option<Vec<(&str, String)>>> =
        sides.iter().map(|(_, e)| e.map(Environment::fields)).collect();
    let Some(names) = columns.iter().flatten().next().map(|f| f.iter().map(|(n, _)| *n)) else {
        return format!("<p id=\"{}\">No environment was recorded.</p>\n", escape(id));
    };
    let mut o = format!("<table id=\"{}\">\n<tr><th></th>", escape(id));
    for (label, _) in sides {
        let _ = write!(o, "<th>{}</th>", escape(label));
    }
    o.push_str("</tr>\n");
    for (row, name) in names.enumerate() {
        let values: Vec<&str> =
            columns.iter().map(|c| c.as_ref().map_or(ABSENT, |f| f[row].1.as_str())).collect();
        if values.iter().all(|v| *v == ABSENT) {
            continue;
        }
        let _ = write!(o, "<tr data-field=\"{}\"><th>{}</th>", escape(name), escape(name));
        for v in &values {
            let class = if *v != values[0] { " class=\"changed\"" } else { "" };
            let _ = write!(o, "<td{class}>{}</td>", escape(v));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}

/// What changed against a baseline, as `<ul id="ID">`: one `<li>` per change, or one
/// saying nothing changed.
pub fn changes_list(id: &str, changes: &[String]) -> String {
    let mut o = format!("<ul id=\"{}\">\n", escape(id));
    for c in changes {
        let _ = writeln!(o, "<li>{}</li>", escape(c));
    }
    if changes.is_empty() {
        o.push_str("<li class=\"same\">the same environment</li>\n");
    }
    o.push_str("</ul>\n");
    o
}

/// The style the tables above want, for a page's `<style>`.
pub const STYLE: &str = ".changed{background:#fff3c4}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::DeviceEnvironment;

    fn rxe(kernel: &str) -> Environment {
        let mut env = Environment::host_at(std::path::Path::new("/nonexistent"));
        env.hostname = "lab<1>".into();
        env.kernel = kernel.into();
        env.device = Some(DeviceEnvironment {
            name: "rxe0".into(),
            model: Some("Soft-RoCE (rxe)".into()),
            firmware: "0.0.0".into(),
            board_id: None,
            link_layer: "Ethernet".into(),
            rate_gbps: Some(2.5),
            active_mtu: Some(4096),
            pcie: None,
            numa_node: None,
            driver: Some("rdma_rxe".into()),
            rdma_core: Some("44.0".into()),
            port: 1,
        });
        env
    }

    #[test]
    fn a_row_per_known_field_and_a_column_per_side() {
        let (a, b) = (rxe("6.1.0"), rxe("6.12.0"));
        let t = environment_table("environment", &[("this host", Some(&a)), ("server", Some(&b))]);
        assert!(
            t.starts_with(
                "<table id=\"environment\">\n<tr><th></th><th>this host</th><th>server</th></tr>\n"
            ),
            "{t}"
        );
        assert!(t.contains("<tr data-field=\"host\"><th>host</th><td>lab&lt;1&gt;</td><td>lab&lt;1&gt;</td></tr>"), "{t}");
        assert!(
            t.contains("<tr data-field=\"model\"><th>model</th><td>Soft-RoCE (rxe)</td>"),
            "{t}"
        );
        assert!(t.contains("<td>6.1.0</td><td class=\"changed\">6.12.0</td>"), "{t}");
        assert!(t.contains("data-field=\"firmware\"") && t.contains("data-field=\"rate\""), "{t}");
        // Nobody has a PCIe link, a board id or an interface: no row.
        for absent in ["PCIe", "board id", "interface"] {
            assert!(!t.contains(&format!("data-field=\"{absent}\"")), "{absent}: {t}");
        }
        let one = environment_table("e", &[("this host", Some(&a)), ("server", None)]);
        assert!(one.contains("<td>rxe0 port 1</td><td class=\"changed\">-</td>"), "{one}");
        let none = environment_table("e", &[("this host", None)]);
        assert_eq!(none, "<p id=\"e\">No environment was recorded.</p>\n");
    }

    #[test]
    fn changes_are_listed_escaped() {
        let l = changes_list("changes", &["firmware 1 → <2>".into()]);
        assert_eq!(l, "<ul id=\"changes\">\n<li>firmware 1 → &lt;2&gt;</li>\n</ul>\n");
        assert!(changes_list("changes", &[]).contains("the same environment"));
    }
}
