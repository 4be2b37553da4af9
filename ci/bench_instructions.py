"""Runs inside the lab (ci/bench-instructions): perftest's and rdmabench's clients under
callgrind, interleaved, for the latency tests (2 B, atomics 8 B) and 2 B write/send
bandwidth; prints the user-space instructions per operation of each tool's timed loop,
the part of them spent waiting, the work (the rest), their spread and the ratios; then
both clients' peak RSS. docs/results.md explains the method; in short:

- The timed loop is one function: rdmabench's by name (its `lat_*`/`bw_send` loops),
  perftest's (a stripped binary) as the function of its own binary that calls into the
  verbs provider most (its `run_iter_*`). Its cost per operation is its own
  instructions plus those of the calls it makes again and again (posts, polls, clock
  reads, reaps), divided by the operations: a call made from it fewer than ONE_OFF times
  (a start barrier, the run's summary, allocations before the loop) is not
  per-operation work.
- Waiting shows as passes of the loop's innermost loop: its most executed instruction
  runs once per pass. One pass per operation finds the answer; every further one is a
  poll that found nothing or a look at a buffer that had not changed yet. The cost of a
  pass is the slope of loop cost against passes over the runs (a run with the server
  slowed under valgrind adds passes on purpose), and work = loop - slope x (passes - 1).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import await_listening  # noqa: E402
from text_order import sections as text_order_sections  # noqa: E402
from callgrind_profile import Profile  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ITERS = int(os.environ.get("BENCH_ITERS", "3000"))
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
RDMABENCH = os.environ.get("BENCH_RDMABENCH", "target/release/rdmabench")
ONLY = [t for t in os.environ.get("BENCH_ONLY", "").split(",") if t]
OUT = os.environ.get("BENCH_PROFILES", "target/bench/callgrind")
# BENCH_BASELINE: another rdmabench binary (an earlier build) profiled alongside, for a
# before/after table from one boot; its ratio is shown, not judged.
BASELINE = os.environ.get("BENCH_BASELINE", "")
TOOLS = ("perftest", "rdmabench") + (("baseline",) if BASELINE else ())
PORTS = {"perftest": 18515, "rdmabench": 18520, "baseline": 18520}

# test: (perftest tool, rdmabench command, size, rdmabench's loop function)
TESTS = {
    "write_lat": ("ib_write_lat", "write-lat", 2, "lat_write_pingpong"),
    "read_lat": ("ib_read_lat", "read-lat", 2, "lat_round_trip"),
    "send_lat": ("ib_send_lat", "send-lat", 2, "lat_send_pingpong"),
    "atomic_lat": ("ib_atomic_lat", "atomic-lat", 8, "lat_round_trip"),
    "write_bw": ("ib_write_bw", "write-bw", 2, "bw_send"),
    "send_bw": ("ib_send_bw", "send-bw", 2, "bw_send"),
}
# A call made fewer times than this from the loop function is not per-operation work (a
# start barrier, the run's summary, allocations before the loop).
ONE_OFF = 8
CALLGRIND = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--compress-strings=no", "--compress-pos=no"]


def command(tool, test, iters):
    pt, rb, size, _ = TESTS[test]
    flags = ["-d", DEV, "-x", "1", "-n", str(iters)]
    if test != "atomic_lat":
        flags += ["-s", str(size)]
    # -F: perftest's clock calibration (rdtsc against gettimeofday) is irregular under
    # valgrind, and without -F it then exits before its report; the loop is the same.
    if tool == "perftest":
        return [pt, "-F"] + flags
    return [BASELINE if tool == "baseline" else RDMABENCH, rb] + flags


def run_pair(tool, server_cmd, client_cmd, slow_server=False, tries=2):
    """Runs a server (pinned to CPU 0) and a client (CPU 1) against it; a pair that
    fails is tried once more (a loaded emulated machine can start a server too late)."""
    slowed = CALLGRIND[:2] + ["--callgrind-out-file=/dev/null"] if slow_server else []
    server_log = tempfile.TemporaryFile()
    server = subprocess.Popen(["taskset", "-c", "0"] + slowed + server_cmd, stdout=server_log, stderr=subprocess.STDOUT)
    # A server under valgrind reads its debug information first: minutes, in the lab.
    await_listening(server, PORTS[tool], 600 if slow_server else 60)
    time.sleep(0.2)
    log = tempfile.TemporaryFile()
    status = subprocess.call(["taskset", "-c", "1"] + client_cmd + ["127.0.0.1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.kill()
    if status != 0:
        if tries > 1:
            print(f"bench: {' '.join(client_cmd)} failed; trying again", flush=True)
            return run_pair(tool, server_cmd, client_cmd, slow_server, tries - 1)
        log.seek(0)
        server_log.seek(0)
        sys.exit(f"bench: {' '.join(client_cmd)} failed:\n{log.read().decode(errors='replace')}\n"
                 f"its server said:\n{server_log.read().decode(errors='replace')}")


def profile(tool, test, tag, slow_server=False):
    path = f"{OUT}/{test}-{tool}-{tag}.cg"
    cmd = command(tool, test, ITERS)
    run_pair(tool, cmd, CALLGRIND + [f"--callgrind-out-file={path}"] + cmd, slow_server)
    return loop_figures(Profile(path), tool, test)


def loop_figures(p, tool, test):
    """(loop instructions per operation, innermost passes per operation)."""
    if tool != "perftest":
        found = [f for f in p.functions(TESTS[test][3], "rdmabench") if f[1].endswith("::" + TESTS[test][3])]
        if len(found) != 1:
            sys.exit(f"bench: expected one {TESTS[test][3]} in rdmabench's profile, found {found}")
        loop = found[0]
    else:
        loop = p.calls_into("/libibverbs/", TESTS[test][0]).most_common(1)[0][0]
    cost = p.self_cost[loop]
    for caller, callee, count, inclusive in p.calls:
        if caller == loop and callee != loop and count >= ONE_OFF:
            cost += inclusive
    return cost / ITERS, p.hottest(loop) / ITERS


def slope(points):
    """Least-squares slope of cost on passes; 0 when the passes hardly vary."""
    xs = [x for _, x in points]
    if max(xs) - min(xs) < 0.05:
        return 0.0
    mx, my = statistics.mean(xs), statistics.mean(c for c, _ in points)
    sxy = sum((x - mx) * (c - my) for c, x in points)
    sxx = sum((x - mx) ** 2 for x in xs)
    return max(0.0, sxy / sxx)


def peak_rss(tool, test_args):
    """The client's peak RSS in KiB, server and client run plainly."""
    pt, rb = test_args
    binary = pt if tool == "perftest" else BASELINE if tool == "baseline" else RDMABENCH
    cmd = [binary] + ([] if tool == "perftest" else [rb]) + ["-d", DEV, "-x", "1"]
    extra = ["-a", "-n", "200"] if rb == "write-bw" else []
    # GNU time, not this process's rusage: a child forked from Python starts with
    # Python's high-water mark, which exec keeps in ru_maxrss.
    with tempfile.NamedTemporaryFile() as kib:
        run_pair(tool, cmd + extra, ["/usr/bin/time", "-f", "%M", "-o", kib.name] + cmd + extra)
        return int(open(kib.name).read().split()[-1])


def text_order(binary):
    """How much of src/text-order.txt the binary's layout followed (build.rs; ci/text-order
    writes the list again when a toolchain or dependency upgrade changed the names). Each
    build's section of the list (plain, mesh) is counted apart."""
    sections = text_order_sections()
    where = {}
    for line in subprocess.run(["nm", "-S", binary], capture_output=True, text=True).stdout.splitlines():
        cols = line.split()
        if len(cols) == 4:
            where[cols[3]] = (int(cols[0], 16), int(cols[1], 16))
    found = [where[s] for symbols in sections.values() for s in symbols if s in where]
    span = (max(a + n for a, n in found) - min(a for a, _ in found)) // 1024 if found else 0
    counts = ", ".join(f"{sum(s in where for s in symbols)} of {len(symbols)} {build}"
                       for build, symbols in sections.items())
    return f"text order: {binary} has {counts} of src/text-order.txt's functions, laid out within {span} KiB"


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = {}
    for test in TESTS:
        if ONLY and test not in ONLY:
            continue
        points = {t: [] for t in TOOLS}
        for rnd in range(ROUNDS + 1):
            slow = rnd == ROUNDS  # the last round slows the server on purpose
            # Rotate which goes first, so drift cancels over the rounds.
            order = TOOLS[rnd % len(TOOLS):] + TOOLS[:rnd % len(TOOLS)]
            for tool in order:
                cost, passes = profile(tool, test, "slowed" if slow else f"r{rnd + 1}", slow)
                points[tool].append((cost, passes))
                print(f"{test} {tool} {'slowed peer' if slow else f'round {rnd + 1}'}: "
                      f"loop {cost:.1f} instructions/op, {passes:.3f} passes/op", flush=True)
        for tool in TOOLS:
            c = slope(points[tool])
            # One pass per operation finds the answer (a bandwidth loop's innermost
            # loop can run less than once per message: its fewest then).
            least = min(1.0, min(passes for _, passes in points[tool]))
            work = [cost - c * (passes - least) for cost, passes in points[tool]]
            rows[(test, tool)] = (points[tool], c, work)
    print()
    print(f"{'test':<11} {'tool':<10} {'loop/op':>8} {'passes':>7} {'per pass':>8} {'work/op':>8} {'spread':>7}")
    ok = True
    for test in TESTS:
        if (test, "perftest") not in rows:
            continue
        medians = {}
        for tool in TOOLS:
            points, c, work = rows[(test, tool)]
            plain = points[:-1]
            medians[tool] = statistics.median(work)
            spread = (max(work) - min(work)) / medians[tool]
            print(f"{test:<11} {tool:<10} {statistics.median(p[0] for p in plain):>8.1f} "
                  f"{statistics.median(p[1] for p in plain):>7.3f} {c:>8.1f} {medians[tool]:>8.1f} {spread:>6.1%}")
        ratio = medians["rdmabench"] / medians["perftest"]
        ok &= ratio <= 1.0
        before = f"  (baseline {medians['baseline'] / medians['perftest']:.3f})" if BASELINE else ""
        print(f"{test:<11} {'ratio':<10} {'':>8} {'':>7} {'':>8} {ratio:>8.3f}  target <= 1.00 "
              f"{'met' if ratio <= 1.0 else 'MISSED'}{before}")
    print()
    print(f"{'client':<26} " + " ".join(f"{t + ' KiB':>14}" for t in TOOLS) + f" {'ratio':>6}")
    for pt, rb in (("ib_write_lat", "write-lat"), ("ib_read_lat", "read-lat"), ("ib_send_lat", "send-lat"),
                   ("ib_atomic_lat", "atomic-lat"), ("ib_write_bw", "write-bw")):
        if ONLY and not any(t.split("_")[0] == rb.split("-")[0] for t in ONLY):
            continue
        kib = {tool: statistics.median(peak_rss(tool, (pt, rb)) for _ in range(ROUNDS)) for tool in TOOLS}
        ratio = kib["rdmabench"] / kib["perftest"]
        ok &= ratio <= 1.0
        label = rb + (" -a -n 200" if rb == "write-bw" else " (defaults)")
        print(f"{label:<26} " + " ".join(f"{kib[t]:>14.0f}" for t in TOOLS) +
              f" {ratio:>6.3f}  target <= 1.00 {'met' if ratio <= 1.0 else 'MISSED'}")
    print(text_order(RDMABENCH))
    version = subprocess.run(["ib_write_bw", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"\n{ROUNDS} rounds and one with the server slowed under valgrind, -n {ITERS}, client under "
          f"callgrind on CPU 1, server on CPU 0; perftest {version}; medians; spread = (max - min) / median of work"
          + (f"; baseline = {BASELINE}" if BASELINE else ""))
    print("all targets met" if ok else "some targets missed")


main()
