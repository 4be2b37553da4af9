"""Runs inside the lab (ci/bench-syscalls): what each operation costs the kernel and the
clock, rdmabench's client against perftest's, in one boot, interleaved:

- system calls per operation, by name: the client under `strace -c -f` at two -n; per
  operation = (count at N2 - count at N1) / (N2 - N1), so start-up and the summary
  cancel out and only what grows with the run is left;
- context switches (voluntary, involuntary) and page faults per operation, the same way,
  from the client's rusage (GNU time) over ROUNDS runs at N2 and ROUNDS at N1 (medians);
- t_typical of the latency tests over ROUNDS interleaved rounds (not under strace): the
  ratio of the median rounds and of the fastest rounds.
- every sample of MODE_RUNS more runs of each tool (-U), pooled: its quantiles, shown
  (where a latency test's time goes: read_lat's two modes, docs/results.md).

Targets: system calls per operation <= perftest's (+ SYSCALL_SLACK) for every test;
t_typical <= 1.00x perftest's for write/read/send/atomic latency, on the median and on
the fastest round. Under TCG a clock read is cheap for both tools only while the kernel
keeps its clock on the TSC (the lab boots with clocksource=tsc): the boot's clock source
is printed with the figures.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts, await_listening, partial_run, table_row  # noqa: E402

# The bench's rounds, fixed before the run (a rerun reruns all of them).
DEFAULT_ROUNDS = 9
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
RDMABENCH = os.environ.get("BENCH_RDMABENCH", "target/release/rdmabench")
ONLY = [t for t in os.environ.get("BENCH_ONLY", "").split(",") if t]
PORTS = {"perftest": 18515, "rdmabench": 18520}
# A system call less than once in this many operations is below what two runs tell
# apart (a heartbeat a second, a stall watch's clock read every few ms where the vDSO
# falls back): the target allows it.
SYSCALL_SLACK = 0.005

# test: (perftest tool, rdmabench command, extra flags, N1, N2, latency?)
TESTS = {
    "write_lat": ("ib_write_lat", "write-lat", ["-s", "2"], 1000, 5000, True),
    "read_lat": ("ib_read_lat", "read-lat", ["-s", "2"], 1000, 5000, True),
    "send_lat": ("ib_send_lat", "send-lat", ["-s", "2"], 1000, 5000, True),
    "atomic_lat": ("ib_atomic_lat", "atomic-lat", [], 1000, 5000, True),
    "write_bw": ("ib_write_bw", "write-bw", ["-s", "2"], 2000, 12000, False),
}
# Where the time of a latency sample goes shows in its distribution, not in a median:
# MODE_RUNS extra runs per tool at N2 with every sample printed (-U), pooled.
MODE_RUNS = 2
QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)
SAMPLE_ROW = re.compile(r"^\d+, ([0-9.]+)$", re.M)
STRACE_ROW = re.compile(r"^\s*[0-9.]+\s+[0-9.]+\s+[0-9]+\s+([0-9]+)\s+(?:[0-9]+\s+)?([a-z_0-9]+)\s*$")


def command(tool, test, iters, more=()):
    pt, rb, extra, *_ = TESTS[test]
    flags = ["-d", DEV, "-x", "1", "-n", str(iters)] + extra + list(more)
    return ([pt] if tool == "perftest" else [RDMABENCH, rb]) + flags


def run_pair(tool, test, iters, wrap, more=()):
    """Server on CPU 0, client (inside `wrap`) on CPU 1; the client's output."""
    cmd = command(tool, test, iters, more)
    server = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    await_listening(server, PORTS[tool], 60)
    time.sleep(0.2)
    client = subprocess.run(["taskset", "-c", "1"] + wrap + cmd + ["127.0.0.1"], capture_output=True, text=True,
                            timeout=600)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
    if client.returncode != 0:
        sys.exit(f"bench: {' '.join(wrap + cmd)} failed:\n{client.stdout}\n{client.stderr}")
    return client.stdout


def syscalls(tool, test, iters):
    """{name: calls} of the client over a whole run."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as f:
        run_pair(tool, test, iters, ["strace", "-c", "-f", "-o", f.name])
        found = {}
        for line in open(f.name):
            m = STRACE_ROW.match(line)
            if m and m.group(2) != "total":
                found[m.group(2)] = int(m.group(1))
        return found


def rusage(tool, test, iters):
    """(voluntary, involuntary context switches, minor + major page faults, client output)."""
    with tempfile.NamedTemporaryFile() as f:
        out = run_pair(tool, test, iters, ["/usr/bin/time", "-f", "%w %c %R %F", "-o", f.name])
        w, c, minor, major = (int(x) for x in open(f.name).read().split()[-4:])
        return w, c, minor + major, out


def samples(tool, test, iters):
    """Every latency sample of a client's run (-U: both tools print `i, usec` lines)."""
    out = run_pair(tool, test, iters, [], ["-U"])
    found = [float(m.group(1)) for m in SAMPLE_ROW.finditer(out)]
    if not found:
        sys.exit(f"bench: {tool} {test} -U printed no `i, usec` sample lines:\n{out}")
    return found


def quantiles(xs):
    xs = sorted(xs)
    return [xs[min(len(xs) - 1, int(q * len(xs)))] for q in QUANTILES]


def per_op(a, b, n1, n2):
    return (b - a) / (n2 - n1)


def main():
    partial = partial_run(ROUNDS, DEFAULT_ROUNDS, ",".join(ONLY))
    verdicts = Verdicts("syscalls", partial)
    tools = ("perftest", "rdmabench")
    tests = [t for t in TESTS if not ONLY or t in ONLY]
    calls, usage, typical, pooled = {}, {}, {}, {}
    for test in tests:
        n1, n2, lat = TESTS[test][3], TESTS[test][4], TESTS[test][5]
        for tool in tools:
            a, b = syscalls(tool, test, n1), syscalls(tool, test, n2)
            calls[(test, tool)] = {k: per_op(a.get(k, 0), b.get(k, 0), n1, n2) for k in set(a) | set(b)}
        # Interleaved rounds: rusage at both -n, t_typical from the N2 runs.
        for rnd in range(ROUNDS):
            order = tools[rnd % 2:] + tools[:rnd % 2]
            for tool in order:
                low = rusage(tool, test, n1)[:3]
                w, c, f, out = rusage(tool, test, n2)
                usage.setdefault((test, tool), []).append((low, (w, c, f)))
                if lat:
                    t = table_row(out, 8 if test == "atomic_lat" else 2)[2]
                    typical.setdefault((test, tool), []).append(t)
                    print(f"round {rnd + 1} {test} {tool}: t_typical {t:.2f} usec", flush=True)
        for rnd in range(MODE_RUNS if lat else 0):
            for tool in tools[rnd % 2:] + tools[:rnd % 2]:
                pooled.setdefault((test, tool), []).extend(samples(tool, test, n2))
    print()
    print("System calls per operation, by name (count at N2 - count at N1, over N2 - N1):")
    for test in tests:
        p, r = calls[(test, "perftest")], calls[(test, "rdmabench")]
        names = sorted(set(p) | set(r), key=lambda k: -max(abs(p.get(k, 0)), abs(r.get(k, 0))))
        shown = [k for k in names if max(abs(p.get(k, 0)), abs(r.get(k, 0))) >= 0.0005]
        print(f"{test:<11} " + ", ".join(f"{k} {p.get(k, 0):.3f}/{r.get(k, 0):.3f}" for k in shown)
              + "  (perftest/rdmabench)")
    print()
    print(f"{'test':<11} {'tool':<10} {'syscalls/op':>11} {'vol cs/op':>9} {'inv cs/op':>9} {'faults/op':>9}"
          f" {'t_typ med':>9} {'t_typ min':>9}")
    for test in tests:
        n1, n2 = TESTS[test][3], TESTS[test][4]
        figures = {}
        for tool in tools:
            total = sum(calls[(test, tool)].values())
            rows = usage[(test, tool)]
            cs = [per_op(statistics.median(lo[k] for lo, _ in rows), statistics.median(hi[k] for _, hi in rows), n1, n2)
                  for k in range(3)]
            ts = typical.get((test, tool), [])
            med, fast = (statistics.median(ts), min(ts)) if ts else (float("nan"), float("nan"))
            figures[tool] = (total, cs, med, fast)
            print(f"{test:<11} {tool:<10} {total:>11.3f} {cs[0]:>9.3f} {cs[1]:>9.3f} {cs[2]:>9.3f} {med:>9.2f} {fast:>9.2f}")
        (pt, pcs, pmed, pfast), (rt, rcs, rmed, rfast) = figures["perftest"], figures["rdmabench"]
        word = verdicts.judge(f"{test} system calls per operation, rdmabench vs perftest ({rt:.3f} vs {pt:.3f})",
                              round(rt - pt, 3), f"<= +{SYSCALL_SLACK}", rt <= pt + SYSCALL_SLACK)
        print(f"{test:<11} syscalls/op rdmabench - perftest {rt - pt:+.3f}  target <= +{SYSCALL_SLACK} {word}")
        for k, what in enumerate(("voluntary context switches", "involuntary context switches", "page faults")):
            verdicts.judge(f"{test} {what} per operation, rdmabench vs perftest", f"{rcs[k]:.4f} vs {pcs[k]:.4f}",
                           "shown", None)
        if TESTS[test][5]:
            for label, r, p in (("median round", rmed, pmed), ("fastest round", rfast, pfast)):
                ratio = r / p
                word = verdicts.judge(f"{test} t_typical rdmabench/perftest, {label}", round(ratio, 3), "<= 1.00",
                                      ratio <= 1.0)
                print(f"{test:<11} t_typical {label}: {ratio:.3f}  target <= 1.00 {word}")
    if pooled:
        print()
        print(f"Latency samples pooled over {MODE_RUNS} runs of each at the larger -n (-U), usec:")
        print(f"{'test':<11} {'tool':<10} " + " ".join(f"{'p' + str(round(q * 100)):>7}" for q in QUANTILES))
    for test in [t for t in tests if (t, "perftest") in pooled]:
        qs = {tool: quantiles(pooled[(test, tool)]) for tool in tools}
        for tool in tools:
            print(f"{test:<11} {tool:<10} " + " ".join(f"{v:>7.2f}" for v in qs[tool]))
        ratios = [r / p for r, p in zip(qs["rdmabench"], qs["perftest"])]
        print(f"{test:<11} {'ratio':<10} " + " ".join(f"{v:>7.3f}" for v in ratios))
        verdicts.judge(f"{test} latency samples p10/p50/p90, rdmabench/perftest (pooled, -U)",
                       " / ".join(f"{ratios[k]:.3f}" for k in (0, 2, 4)), "shown", None)
    source = open("/sys/devices/system/clocksource/clocksource0/current_clocksource").read().strip()
    version = subprocess.run(["ib_write_bw", "--version"], capture_output=True, text=True).stdout.strip()
    about = (f"{ROUNDS} interleaved rounds; client on CPU 1, server on CPU 0; perftest {version}; system calls by "
             f"strace -c -f at two -n (latency 1000/5000, write_bw -s 2 2000/12000); context switches and faults "
             f"from GNU time, medians; t_typical of plain runs at the larger -n; clock source {source} (under TCG "
             f"both tools' clock reads are expensive where the vDSO falls back to a system call)")
    print(f"\n{about}")
    verdicts.finish(about)


main()
