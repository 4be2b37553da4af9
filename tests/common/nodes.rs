//! The lab of several hosts (`ci/lab-vm --nodes N`): the nodes' addresses, and commands on
//! another node over the lab's ssh. A command started there runs detached, its output in
//! that node's /tmp, so it outlives an ssh session that a link fault cuts; it is read
//! back over ssh once it has ended.

use std::process::Command;
use std::time::{Duration, Instant};

/// The lab's addresses, node 1 first. Asserts that this is node 1 of a lab of two or
/// more hosts: a two-host test fails, never passes vacuously, elsewhere.
pub fn addresses() -> Vec<String> {
    let nodes: Vec<String> = std::env::var("RDMABENCH_NODES")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    assert!(
        nodes.len() >= 2 && std::env::var("RDMABENCH_NODE").as_deref() == Ok("1"),
        "two-host lab test: run on node 1 of `ci/lab-vm --nodes 2` (RDMABENCH_NODES is {nodes:?})"
    );
    nodes
}

/// `mpirun` of `rdmabench ARGS` with one rank on each of nodes 1–3, over the lab's ssh,
/// MPI's own connections on the lab link; its output once it has ended (a failure past
/// `limit`).
pub fn mpirun_three(args: &[&str], limit: Duration) -> std::process::Output {
    let nodes = addresses();
    assert!(nodes.len() >= 3, "a three-host test: run in `ci/lab-vm --nodes 3` ({nodes:?})");
    let config = std::env::var("RDMABENCH_LAB_SSH_CONFIG").expect("the lab's ssh config");
    let agent = format!("ssh -F {config}");
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--host", "node1,node2,node3", "-np", "3", "--mca", "plm_rsh_agent", &agent])
        .args(["--mca", "oob_tcp_if_include", "198.18.1.0/24"])
        .args(["--mca", "btl_tcp_if_include", "198.18.1.0/24"])
        .arg(env!("CARGO_BIN_EXE_rdmabench"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    super::finish(c.spawn().unwrap(), limit)
}

/// Node `n`'s address (1-based).
pub fn address(n: usize) -> String {
    addresses()[n - 1].clone()
}

/// `ssh nodeN` with the lab's configuration.
pub fn ssh(n: usize) -> Command {
    let config = std::env::var("RDMABENCH_LAB_SSH_CONFIG").expect("RDMABENCH_LAB_SSH_CONFIG set");
    let mut c = Command::new("ssh");
    c.args(["-F", &config, &format!("node{n}")]);
    c
}

/// Readies [`TICK`] in a shell line on a node (bash, the lab's login shell).
const WAIT_TICK: &str =
    "tick=/tmp/rdmabench-tick-$$; mkfifo $tick && exec 9<>$tick && rm $tick || exit 1;";
/// A fifth of a second's wait in bash itself: `read -t` on a FIFO nobody writes. A
/// `sleep` is a process start, a tenth of a second of CPU on a TCG guest's one vCPU.
const TICK: &str = "read -r -t 0.2 -u 9 _";

/// Runs the shell line `line` on node `n` and returns what it printed; panics if it
/// fails or takes over `limit`.
pub fn on(n: usize, line: &str, limit: Duration) -> String {
    let mut c = ssh(n);
    c.arg(line);
    let out = super::finish(
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        limit,
    );
    assert!(out.status.success(), "node{n}: `{line}` failed: {}", super::err(&out));
    super::text(&out)
}

/// A command started detached on another node.
pub struct Remote {
    node: usize,
    files: String,
}

/// Where a remote command's stderr starts in [`Remote::wait`]'s answer (after its status
/// line and stdout): a control character no rdmabench output holds, around a name.
const STDERR_FOLLOWS: &str = "\u{1}rdmabench-hosts: stderr\u{1}";

/// How a remote command ended.
pub struct RemoteOutput {
    /// Its exit status.
    pub status: i32,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl RemoteOutput {
    /// [`Remote::wait`]'s answer (`rc N`, stdout, the marker, stderr); `None` while the
    /// command runs (nothing said) or its status file holds no number yet.
    fn parse(said: &str) -> Option<RemoteOutput> {
        let (rc, rest) = said.strip_prefix("rc ")?.split_once('\n')?;
        let (stdout, stderr) = rest.split_once(STDERR_FOLLOWS)?;
        Some(RemoteOutput {
            status: rc.trim().parse().ok()?,
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
        })
    }
}

impl Remote {
    /// Starts `rdmabench ARGS` on node `n` (the same binary: the repo is shared), killed
    /// there after `limit`. `tag` names its files in that node's /tmp.
    pub fn rdmabench(n: usize, tag: &str, args: &[&str], limit: Duration) -> Remote {
        let files = format!("/tmp/rdmabench-hosts-{tag}");
        let command: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_rdmabench"))
            .chain(args.iter().copied())
            .map(quote)
            .collect();
        let line = format!(
            "rm -f {files}.*; setsid bash -c 'echo $$ > {files}.pid; \
             timeout -k 5 {} {} > {files}.out 2> {files}.err; echo $? > {files}.rc' \
             < /dev/null > /dev/null 2>&1 &",
            limit.as_secs(),
            command.join(" ").replace('\'', "'\\''"),
        );
        on(n, &line, Duration::from_secs(60));
        Remote { node: n, files }
    }

    /// Waits up to `limit` for it to end: each ssh call waits on the node itself, up to
    /// 30 s (an ssh call twice a second, while the test's own processes ran, was two
    /// process starts a look on each node), and the one that sees it ended brings its
    /// status, stdout and stderr back together (three ssh calls were ~1 s in a TCG guest).
    pub fn wait(&self, limit: Duration) -> RemoteOutput {
        let start = Instant::now();
        loop {
            let said = on(
                self.node,
                &format!(
                    "{WAIT_TICK} for i in {{1..150}}; do [ -s {0}.rc ] && break; {TICK}; done; \
                     [ -s {0}.rc ] || exit 0; echo \"rc $(< {0}.rc)\"; cat {0}.out; \
                     printf '{1}'; cat {0}.err",
                    self.files,
                    STDERR_FOLLOWS.replace('\u{1}', "\\001"),
                ),
                Duration::from_secs(90),
            );
            if let Some(ended) = RemoteOutput::parse(&said) {
                return ended;
            }
            assert!(start.elapsed() < limit, "node{}: still running after {limit:?}", self.node);
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Stops it with SIGTERM (`timeout` passes it on), as a user's Ctrl-C or kill would.
    pub fn stop(&self) {
        on(
            self.node,
            &format!("pkill -TERM -P \"$(cat {}.pid)\" timeout", self.files),
            Duration::from_secs(60),
        );
    }

    /// Waits (in one ssh call) until something listens on TCP `port` on its node: a
    /// server started over ssh in a TCG guest can take longer to listen than a client's
    /// few seconds of retrying a refused connection. The look is bash's own `read` of
    /// /proc/net/tcp (a `grep` and a `sleep` ten times a second were two process starts a
    /// look, on the one vCPU the server being waited for starts on).
    pub fn wait_listening(&self, port: u16) {
        let check = format!(
            "{WAIT_TICK} for i in {{1..300}}; do for f in /proc/net/tcp /proc/net/tcp6; do \
             while read -r line; do [[ $line =~ :{port:04X}\\ [0-9A-F]+:0000\\ 0A ]] \
             && echo listening && exit 0; done < $f; done; {TICK}; done; echo not listening"
        );
        let said = on(self.node, &check, Duration::from_secs(90));
        assert!(
            said.contains("listening") && !said.contains("not listening"),
            "node{}: nothing listens on {port}",
            self.node
        );
    }

    /// A file it wrote in that node's /tmp (`--json`), by the name given.
    pub fn read(&self, path: &str) -> String {
        on(self.node, &format!("cat {}", quote(path)), Duration::from_secs(60))
    }
}

fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// rxe0's hardware counter `name` on node `n` (soft-RoCE's: `completer_retry_err`,
/// `rcvd_seq_err`, …).
pub fn counter(n: usize, name: &str) -> u64 {
    let path = format!("/sys/class/infiniband/rxe0/ports/1/hw_counters/{name}");
    let text = if std::env::var("RDMABENCH_NODE").as_deref() == Ok(&n.to_string()) {
        std::fs::read_to_string(&path).unwrap()
    } else {
        on(n, &format!("cat {path}"), Duration::from_secs(60))
    };
    text.trim().parse().unwrap_or_else(|_| panic!("node{n}: {path} holds {text:?}"))
}
