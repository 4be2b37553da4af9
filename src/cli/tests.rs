//! The command line's tests: flags parse into the specs and options they name, and
//! errors name the flag (multi-rail's plan included, as a command line asks for it).

use super::*;
use crate::counters::CounterSelection;
use crate::rails::plan;
use crate::spec::Figure;

/// A perftest-style test's command line, as the run would take it.
fn test(args: &[&str]) -> Result<args::TestArgs, Error> {
    let cli = parse(["rdmabench"].iter().chain(args).copied()).unwrap().unwrap();
    let Command::Perf(kind, a) = cli.command else { panic!("perf") };
    a.to_test(kind)
}

#[test]
fn deferred_subcommands_keep_their_own_line_and_build_only_when_parsed() {
    let unbuilt = RawCli::command();
    let abouts: Vec<(String, String)> = unbuilt
        .get_subcommands()
        .map(|c| {
            (c.get_name().to_string(), c.get_about().map(|a| a.to_string()).unwrap_or_default())
        })
        .collect();
    // Deferred: nothing but the name and the line until a subcommand is parsed.
    assert!(unbuilt.get_subcommands().all(|c| c.get_arguments().next().is_none()));
    assert_eq!(abouts.len(), 21);
    let mut built = RawCli::command();
    built.build();
    for (name, about) in &abouts {
        let sub = built.find_subcommand(name).unwrap();
        assert!(sub.get_arguments().next().is_some(), "{name} has no arguments");
        let built_about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        assert_eq!(&built_about, about, "{name}");
    }
    assert!(abouts.iter().any(|(n, a)| n == "write-lat" && a.starts_with("RDMA write latency")));
}

#[test]
fn devices_flags_parse() {
    let cli = parse(["rdmabench", "devices", "-d", "mlx4_0", "-v", "--json"]).unwrap().unwrap();
    let Command::Devices(args) = cli.command else { panic!("devices") };
    assert_eq!(args.device.as_deref(), Some("mlx4_0"));
    assert!(args.verbose && args.json);
    let cli = parse(["rdmabench", "devices", "--ib-dev=rxe0"]).unwrap().unwrap();
    let Command::Devices(args) = cli.command else { panic!("devices") };
    assert_eq!(args.device.as_deref(), Some("rxe0"));
}

#[test]
fn perftest_flags_parse_with_their_names() {
    let cli = parse([
        "rdmabench",
        "read-bw",
        "-d",
        "mlx4_0",
        "-x",
        "3",
        "-s",
        "64K",
        "-n",
        "2000",
        "-q",
        "4",
        "-c",
        "RC",
        "--report_gbits",
        "-R",
        "server1",
    ])
    .unwrap()
    .unwrap();
    let Command::Perf(test, a) = cli.command else { panic!("perf") };
    assert_eq!(test, TestKind { verb: Verb::Read, measure: Measure::Bw });
    assert_eq!(
        (a.run.size, a.run.iters, a.qps, a.gid_index),
        (Some(65536), Some(2000), Some(4), Some(3))
    );
    assert!(a.report.report_gbits && a.rdma_cm);
    assert_eq!(a.host.as_deref(), Some("server1"));
    let cli = parse(["rdmabench", "atomic-lat", "-A", "CMP_AND_SWAP", "--report-gbits"])
        .unwrap()
        .unwrap();
    let Command::Perf(test, a) = cli.command else { panic!("perf") };
    assert_eq!(test.id(), "atomic_lat");
    assert!(a.host.is_none() && a.report.report_gbits);
    assert!(parse(["rdmabench", "write-bw", "-s", "12Q"])
        .unwrap_err()
        .message
        .contains("not a size"));
}

#[test]
fn perftests_verifier_limits_are_thresholds() {
    let t = test(&["write-bw", "-w", "5000", "-y", "0.5", "--backend", "verbs"]).unwrap();
    assert_eq!((t.output.min_bw, t.output.min_msg_rate), (Some(5000.0), Some(0.5)));
    let t = test(&["send-bw", "--limit_bw", "7", "--min-bw", "7", "--backend", "verbs"]);
    assert_eq!(t.unwrap().output.min_bw, Some(7.0), "the same limit twice is one limit");
    let e = test(&["write-bw", "-w", "1", "--min-bw", "2", "--backend", "verbs"]).unwrap_err();
    assert!(e.message.contains("one limit"), "{e}");
    let e = test(&["write-lat", "-y", "1", "--backend", "verbs"]).unwrap_err();
    assert!(e.message.contains("-y/--limit_msgrate: only bandwidth tests"), "{e}");
    let e = test(&["read-bw", "--limit_bw=-1", "--backend", "verbs"]).unwrap_err();
    assert!(e.message.contains("(-w/--limit_bw): a number, 0 or more"), "{e}");
}

/// docs/perftest-flags.md is checked against the command line: a flag it calls
/// **same** is taken by every test, one it says clap refuses is refused.
#[test]
fn the_perftest_flag_table_matches_the_command_line() {
    let mut cli = definition();
    cli.build();
    let table = include_str!("../../docs/perftest-flags.md");
    let (mut same, mut refused) = (0, 0);
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cols: Vec<&str> = row.split(" | ").collect();
        let status = cols[2];
        // The flags of the row: `-d`, `--ib-dev=<dev>`; `-c XRC` names a value.
        let flags: Vec<&str> = cols[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|f| f.starts_with('-') && !f.contains(' '))
            .map(|f| f.split('=').next().unwrap())
            .filter(|f| !matches!(*f, "-h" | "--help"))
            .collect();
        for test in ["write-bw", "read-lat", "send-bw", "atomic-lat"] {
            let sub = cli.find_subcommand(test).unwrap();
            let known = |flag: &str| {
                sub.get_arguments().any(|a| match flag.strip_prefix("--") {
                    Some(long) => {
                        a.get_long() == Some(long)
                            || a.get_all_aliases().is_some_and(|al| al.contains(&long))
                    }
                    None => a.get_short().map(|c| format!("-{c}")).as_deref() == Some(flag),
                })
            };
            for f in &flags {
                if status.starts_with("**same**") {
                    assert!(known(f), "{test}: the table says {f} is the same: {row}");
                    same += 1;
                } else if status.contains("clap: unknown argument") {
                    assert!(!known(f), "{test}: the table says clap refuses {f}: {row}");
                    refused += 1;
                }
            }
        }
    }
    assert!(same > 100 && refused > 200, "rows read: {same} same, {refused} refused");
}

#[test]
fn output_names_a_figure_the_test_has() {
    let only = |args: &[&str]| test(args).unwrap().output.only;
    assert_eq!(only(&["write-bw", "--output", "bandwidth"]), Some(Figure::Bandwidth));
    assert_eq!(only(&["send-bw", "--output=message_rate"]), Some(Figure::MessageRate));
    assert_eq!(only(&["read-lat", "--output", "latency"]), Some(Figure::Latency));
    assert_eq!(only(&["read-lat"]), None);
    let e = test(&["write-lat", "--output", "bandwidth"]).unwrap_err();
    assert!(e.message.contains("a latency test gives latency"), "{e}");
    let e = test(&["write-bw", "--output", "latency"]).unwrap_err();
    assert!(e.message.contains("bandwidth or message_rate"), "{e}");
    assert!(parse(["rdmabench", "write-bw", "--output", "cpu"]).is_err());
}

#[test]
fn report_counters_name_counters_of_one_verbs_port() {
    let counters = |args: &[&str]| test(args).map(|t| t.local.counters);
    let all = counters(&["write-bw", "-W", "all", "--backend", "verbs"]).unwrap();
    assert_eq!(all, Some(CounterSelection::All));
    let names = "port_xmit_wait,hw_counters/rcvd_pkts";
    let list = counters(&["read-lat", "--report-counters", names, "--backend", "verbs"]);
    let names = vec!["port_xmit_wait".to_string(), "hw_counters/rcvd_pkts".to_string()];
    assert_eq!(list.unwrap(), Some(CounterSelection::Named(names)));
    assert_eq!(counters(&["write-bw", "--backend", "verbs"]).unwrap(), None);
    let e = test(&["write-bw", "-W", "../../etc/passwd"]).unwrap_err();
    assert!(e.message.starts_with("-W \"../../etc/passwd\": a counter is `all` or"), "{e}");
    let e = test(&["write-bw", "-W", "all", "--backend", "nd", "-d", "10.0.0.1"]).unwrap_err();
    assert!(e.message.contains("-W: reads a verbs port's counters"), "{e}");
    let e = test(&["write-bw", "-W", "all", "-d", "rxe0,rxe1", "--backend", "verbs"]).unwrap_err();
    assert!(e.message.contains("-W: one device"), "{e}");
}

#[test]
fn threads_spread_a_bandwidth_tests_qps_and_nothing_else() {
    let threads = |args: &[&str]| test(args).map(|t| t.local.threads);
    assert_eq!(threads(&["write-bw", "--backend", "verbs"]).unwrap(), 1);
    assert_eq!(
        threads(&["send-bw", "-q", "4", "--threads", "2", "--backend", "verbs"]).unwrap(),
        2
    );
    assert_eq!(threads(&["write-lat", "--threads", "1", "--backend", "verbs"]).unwrap(), 1);
    let refused = |args: &[&str], why: &str| {
        let e = test(args).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Usage, "{e}");
        assert!(e.message.contains(why), "{args:?}: {e}");
    };
    refused(&["write-bw", "--threads", "0", "--backend", "verbs"], "--threads 0: at least 1");
    refused(
        &["write-bw", "--threads", "2", "--backend", "verbs"],
        "more threads than queue pairs (-q 1)",
    );
    refused(&["read-lat", "--threads", "2", "--backend", "verbs"], "only bandwidth tests");
    refused(&["send-bw", "-q", "2", "--threads", "2", "-b", "--backend", "verbs"], "not with -b");
    refused(
        &["send-bw", "-q", "2", "--threads", "2", "--use-srq", "--backend", "verbs"],
        "--use-srq",
    );
    // (The backend said: on Windows NetworkDirect's default refuses --perftest first.)
    refused(
        &["write-bw", "-q", "2", "--threads", "2", "--perftest", "h", "--backend", "verbs"],
        "not with --perftest",
    );
    refused(
        &["write-bw", "-q", "2", "--threads", "2", "-d", "rxe0,rxe1", "--backend", "verbs"],
        "one device",
    );
}

#[test]
fn the_measuring_thread_goes_where_one_flag_says() {
    let at = |args: &[&str]| test(args).map(|t| (t.local.pin, t.local.numa_node));
    assert_eq!(at(&["write-bw", "--backend", "verbs"]).unwrap(), (vec![], None));
    let cores = at(&["write-bw", "--pin_cores", "0,2-3", "--backend", "verbs"]).unwrap();
    assert_eq!(cores, (vec![0, 2, 3], None));
    assert_eq!(
        at(&["read-lat", "--numa_node", "1", "--backend", "verbs"]).unwrap(),
        (vec![], Some(1))
    );
    let e = test(&["write-bw", "--pin_cores", "1", "--numa_node", "0", "--backend", "verbs"]);
    assert!(e.unwrap_err().message.contains("one of them"));
    let e = test(&["write-bw", "--pin_cores", "x", "--backend", "verbs"]).unwrap_err();
    assert_eq!(e.message, "--pin_cores 'x': a CPU list like 0,2-3");
    let e = test(&["write-bw", "-D", "2", "--run_infinitely", "--output", "bandwidth"]);
    assert!(e.unwrap_err().message.contains("--run_infinitely: prints its table as it goes"));
    let e = test(&["write-bw", "--run_infinitely", "--backend", "verbs"]).unwrap_err();
    assert!(e.message.contains("give -D SECS"), "{e}");
    let e = test(&["write-bw", "-D", "4", "-f", "1", "--run_infinitely", "--backend", "verbs"]);
    assert!(e.unwrap_err().message.contains("-f: --run_infinitely measures"));
    let t = test(&["write-bw", "-D", "4", "--run_infinitely", "--backend", "verbs"]).unwrap();
    assert_eq!(t.spec.run, crate::spec::RunLength::Duration { secs: 4, margin_ms: 0 });
}

#[test]
fn usage_errors_are_one_line_naming_the_problem() {
    let err = parse(["rdmabench", "devices", "--bogus"]).unwrap_err().message;
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains("--bogus"), "{err}");
    let err = parse(["rdmabench", "frobnicate"]).unwrap_err().message;
    assert!(err.contains("frobnicate"), "{err}");
    let err = parse(["rdmabench", "devices", "-d"]).unwrap_err().message;
    assert!(err.contains("DEVICE"), "{err}");
}

/// Over verbs, whose devices have names, also where NetworkDirect is the default.
fn rails_test(line: &str) -> TestArgs {
    let words = line.split_whitespace().chain(["--backend", "verbs"]);
    let cli = parse(words.map(std::ffi::OsString::from)).unwrap().unwrap();
    match cli.command {
        Command::Perf(kind, a) => a.to_test(kind).unwrap(),
        _ => unreachable!(),
    }
}

#[test]
fn several_devices_make_rails_on_consecutive_ports_with_a_host_each_or_one_for_all() {
    assert_eq!(plan(&rails_test("rdmabench write-bw -d rxe0")).unwrap(), None);
    let rails = plan(&rails_test("rdmabench write-bw -d rxe0,rxe1 -p 19000 10.0.0.1,10.0.1.1"))
        .unwrap()
        .unwrap();
    assert_eq!(rails.len(), 2);
    assert_eq!((rails[0].port, rails[1].port), (19000, 19001));
    assert_eq!(rails[1].host.as_deref(), Some("10.0.1.1"));
    let rails = plan(&rails_test("rdmabench write-bw -d a,b,c -p 19000 h")).unwrap().unwrap();
    assert!(rails.iter().all(|r| r.host.as_deref() == Some("h")));
    let server = plan(&rails_test("rdmabench write-bw -d a,b")).unwrap().unwrap();
    assert!(server.iter().all(|r| r.host.is_none() && r.cpus.is_empty()));
}

#[test]
fn rails_refuse_latency_tests_mismatched_hosts_and_ports_past_the_end() {
    let e = plan(&rails_test("rdmabench write-lat -d a,b h")).unwrap_err();
    assert!(e.message.contains("multi-rail) is for bandwidth tests"), "{e}");
    let e = plan(&rails_test("rdmabench write-bw -d a,b,c h1,h2")).unwrap_err();
    assert!(e.message.contains("2 hosts for 3 rails"), "{e}");
    let e = plan(&rails_test("rdmabench write-bw -d a,b -p 65535 h")).unwrap_err();
    assert!(e.message.contains("rail 1's port is past 65535"), "{e}");
    let e = plan(&rails_test("rdmabench write-bw -d a,,b h")).unwrap_err();
    assert!(e.message.contains("an empty device name"), "{e}");
}

/// A TCP test's command line, as the run would take it.
fn tcp_test(args: &[&str]) -> Result<args::TestArgs, Error> {
    let cli = parse(["rdmabench"].iter().chain(args).copied())?.unwrap();
    let Command::Tcp(measure, a) = cli.command else { panic!("tcp") };
    a.to_test(measure)
}

#[test]
fn store_alone_is_the_default_store_and_the_next_word_its_path() {
    let default = |t: &args::TestArgs| {
        let p = t.output.store.clone().unwrap();
        assert!(p.ends_with("rdmabench/results.db"), "{}", p.display());
    };
    let t = tcp_test(&["tcp-lat", "127.0.0.1", "--store"]).unwrap();
    assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
    default(&t);
    let t = tcp_test(&["tcp-bw", "--store", "-P", "2", "127.0.0.1"]).unwrap();
    assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
    default(&t);
    for line in
        [&["tcp-bw", "--store", "s.db", "127.0.0.1"][..], &["tcp-bw", "--store=s.db", "127.0.0.1"]]
    {
        let t = tcp_test(line).unwrap();
        assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(t.output.store.as_deref(), Some(std::path::Path::new("s.db")));
    }
    // A server's own store.
    let t = tcp_test(&["tcp-bw", "--store", "runs/s.db"]).unwrap();
    assert_eq!((t.host, t.output.store.unwrap()), (None, "runs/s.db".into()));
    // `--store HOST`: refused, not a server writing a file named after the host.
    let e = tcp_test(&["tcp-lat", "--store", "127.0.0.1"]).unwrap_err();
    assert_eq!(
        e.message,
        "--store 127.0.0.1: the word after --store is its PATH, and this left no HOST; \
         write `HOST --store` for the default store, or a PATH ending in .db"
    );
    let e = test(&["write-bw", "--store", "lab1"]).unwrap_err();
    assert!(e.message.starts_with("--store lab1: the word after"), "{}", e.message);
}

#[test]
fn a_near_miss_gets_a_suggestion_and_the_subcommands_help() {
    let err = |line: &[&str]| {
        parse(["rdmabench"].iter().chain(line).copied()).map(|_| ()).unwrap_err().message
    };
    // The names JSON, history and profiles use are the subcommands' aliases.
    let t = tcp_test(&["tcp_bw", "127.0.0.1"]).unwrap();
    assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
    assert!(test(&["write_lat", "127.0.0.1"]).is_ok());
    assert_eq!(
        err(&["write-bww"]),
        "unrecognized subcommand 'write-bww'; tip: a similar subcommand exists: 'write-bw' \
         (see rdmabench --help)"
    );
    assert_eq!(
        err(&["tcp-bw", "-t", "5", "127.0.0.1"]),
        "unexpected argument '-t' found; iperf3's -t SECS is -D SECS here \
         (see rdmabench tcp-bw --help)"
    );
    assert_eq!(
        err(&["tcp-lat", "-c", "127.0.0.1"]),
        "unexpected argument '-c' found; iperf3's -c HOST is HOST alone here (no HOST: the \
         server) (see rdmabench tcp-lat --help)"
    );
    let e = err(&["tcp_bw", "-l", "64K", "127.0.0.1"]);
    assert!(e.contains("iperf3's -l SIZE is -s SIZE here"), "{e}");
    assert!(e.ends_with("(see rdmabench tcp-bw --help)"), "{e}");
    let e = err(&["write-bw", "--stor"]);
    assert!(e.contains("a similar argument exists: '--store'"), "{e}");
    assert!(e.ends_with("(see rdmabench write-bw --help)"), "{e}");
}

#[test]
fn rails_refuse_store_with_the_way_out() {
    let line = ["write-bw", "-d", "rxe0,rxe1", "--backend", "verbs", "--store=r.db", "h"];
    let e = test(&line).unwrap_err();
    assert_eq!(e.kind, crate::error::ErrorKind::Usage, "{e}");
    assert!(e.message.starts_with("--store: one device"), "{e}");
    assert!(e.message.contains("-d DEVICE --store"), "{e}");
    // One device records as before.
    assert!(test(&["write-bw", "-d", "rxe0", "--backend", "verbs", "--store=r.db", "h"]).is_ok());
}
