"""Runs on node 1 of `ci/lab-vm --nodes 2` (ci/bench-hosts): rdmabench against perftest
(RDMA) and iperf3 (TCP) across the lab link, servers on node 2 over the lab's ssh,
interleaved over several rounds; prints medians and rdmabench/reference ratios."""
import os
import shlex
import statistics
import subprocess

from bench_common import client_against, table_row

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
RDMABENCH = os.path.abspath(os.environ.get("RDMABENCH", "target/release/rdmabench"))
PEER = "198.18.1.2"
SSH = ["ssh", "-F", os.environ["RDMABENCH_LAB_SSH_CONFIG"], "node2"]
MTU = os.environ.get("RDMABENCH_LAB_MTU", "1500")
# RDMA: (test, size, iterations); sized for the lab's 5-25 MB/s.
RDMA = [("write_bw", 65536, 300), ("read_bw", 65536, 300), ("send_bw", 65536, 300),
        ("write_bw", 1048576, 30), ("write_lat", 2, 1000)]
TCP_SECS = "5"
ONLY = os.environ.get("BENCH_ONLY", "")  # a prefix of the cases to run: "tcp", "write_bw"


def wait_listening(port):
    """Waits (on node 2, over one ssh call) until something listens on `port`: perftest and
    iperf3 clients do not retry a refused connection, and a probing connection would be
    taken by their servers as the client."""
    check = (f"for i in $(seq 600); do grep -qiE ':{port:04X} [0-9A-F]+:0000 0A' /proc/net/tcp /proc/net/tcp6 "
             "&& exit 0; sleep 0.1; done; exit 1")
    subprocess.run(SSH + [check], timeout=90, check=True)


def pair(server_cmd, client_cmd, port, probe=False):
    """The server on node 2 (over ssh), the client here; returns the client's output."""
    server = subprocess.Popen(SSH + [shlex.join(["timeout", "300"] + server_cmd)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if probe:  # rdmabench's clients retry a refused connection themselves
        wait_listening(port)
    return client_against(server, client_cmd)


def rdma(tool, test, size, iters):
    verb, kind = test.split("_")
    flags = ["-d", "rxe0", "-x", "1", "-s", str(size), "-n", str(iters)]
    if tool == "perftest":
        cmd = [f"ib_{verb}_{kind}"] + flags
        out = pair(cmd, cmd + [PEER], 18515, probe=True)
    else:
        cmd = [RDMABENCH, f"{verb}-{kind}", "-p", "18530"] + flags
        out = pair(cmd, cmd + [PEER], 18530)
    cols = table_row(out, size)
    # bw: BW average (MiB/s) is the 2nd value; lat: t_typical (usec) the 3rd.
    return cols[1] if kind == "bw" else cols[2]


def tcp(tool, streams):
    if tool == "iperf3":
        out = pair(["iperf3", "-s", "-1", "-p", "5201"],
                   ["iperf3", "-c", PEER, "-p", "5201", "-t", TCP_SECS, "-P", str(streams), "-f", "m"],
                   5201, probe=True)
        line = [l for l in out.splitlines() if "receiver" in l and ("SUM" in l or streams == 1)][-1]
        mbits = float(line.split("Mbits/sec")[0].split()[-1])
        return mbits * 1e6 / 8 / 2**20  # MiB/s
    cmd = [RDMABENCH, "tcp-bw", "-p", "18531", "-s", "131072", "-D", TCP_SECS, "-P", str(streams)]
    out = pair(cmd, cmd + [PEER], 18531)
    return table_row(out, 131072)[1]


def main():
    cases = [(f"{t} {s}", "perftest", (lambda tool, t=t, s=s, n=n: rdma(tool, t, s, n))) for t, s, n in RDMA]
    cases += [(f"tcp_bw P{p}", "iperf3", (lambda tool, p=p: tcp(tool, p))) for p in (1, 4)]
    cases = [c for c in cases if c[0].startswith(ONLY)]
    results = {}
    for rnd in range(1, ROUNDS + 1):
        for name, reference, run in cases:
            order = [reference, "rdmabench"]
            if rnd % 2 == 0:
                order.reverse()  # alternate who goes first: drift cancels over the rounds
            for tool in order:
                value = run(tool)
                results.setdefault((name, tool), []).append(value)
                print(f"round {rnd} {name} {tool}: {value:.2f}", flush=True)
    print()
    print(f"MTU {MTU}: {'test':<18} {'reference':>18} {'rdmabench':>12} {'ratio':>7}")
    for name, reference, _ in cases:
        ref = statistics.median(results[(name, reference)])
        ours = statistics.median(results[(name, "rdmabench")])
        unit = "usec" if "lat" in name else "MiB/s"
        print(f"MTU {MTU}: {name:<18} {reference:>8} {ref:>7.2f} {ours:>7.2f} {unit:<5} {ours / ref:>6.3f}")
    print(f"\n{ROUNDS} rounds, medians; bandwidth is BW average (MiB/s), latency t_typical (usec);"
          f" TCP: {TCP_SECS} s runs, rdmabench's 128 KiB writes against iperf3's defaults")


main()
