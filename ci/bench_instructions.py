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
- That price of an idle pass is a figure of its own, both tools' printed and rdmabench's
  judged against perftest's (target <= 1.00x): the work ratios leave it out. A slope of
  0 for one tool and not the other (its passes did not vary, so its price is unknown) is
  a miss, not a pass.
- Both clients' headers (TX depth, CQ moderation, inline size, ...) must agree on every
  parameter both print: a difference fails the run, as its ratios compare unlike loops.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts, await_listening, partial_run  # noqa: E402
from text_order import sections as text_order_sections  # noqa: E402
from callgrind_profile import Profile  # noqa: E402

# The bench's rounds, fixed before the run (a rerun reruns all of them).
DEFAULT_ROUNDS = 3
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
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
# The header lines both tools print (perftest's layout, which rdmabench follows) that
# set what the timed loop does: each must read the same in both clients' headers.
PARAMETERS = ("Number of qps", "Connection type", "Using SRQ", "TX depth", "RX depth", "CQ Moderation",
              "Post List", "Mtu", "Link type", "GID index", "Max inline data", "Outstand reads", "Atomic type")
HEADER_LINE = re.compile(r"^ ([A-Za-z][^:]*?)\s*:\s*(.*)$")
CALLGRIND = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--compress-strings=no", "--compress-pos=no"]


# Flags given to both tools so that their loops do the same work. perftest takes the
# device's max_qp_rd_atom (128 on rxe) for outstanding reads, where rdmabench keeps at
# most 16 (ConnectX-2/3's maximum): both get -o 16. perftest never inlines on a device it
# does not know (soft-RoCE among them), even when -I asks ("Device not recognized to
# implement inline feature. Disabling it"), where rdmabench inlines its documented 220 B
# (write) and 236 B (send): both get -I 0, the only inline size perftest runs here.
# rdmabench creates a latency test's send queue at least 16 deep (its unsignaled posts)
# and its header says so, where perftest creates -t's (1 by default): both get -t 16. The
# parameters check below then compares like with like.
SAME_WORK = {
    "write_lat": ["-I", "0", "-t", "16"],
    "send_lat": ["-I", "0", "-t", "16"],
    "read_lat": ["-o", "16", "-t", "16"],
    "atomic_lat": ["-o", "16", "-t", "16"],
}


def command(tool, test, iters):
    pt, rb, size, _ = TESTS[test]
    flags = ["-d", DEV, "-x", "1", "-n", str(iters)] + SAME_WORK.get(test, [])
    if test != "atomic_lat":
        flags += ["-s", str(size)]
    # -F: perftest's clock calibration (rdtsc against gettimeofday) is irregular under
    # valgrind, and without -F it then exits before its report; the loop is the same.
    if tool == "perftest":
        return [pt, "-F"] + flags
    return [BASELINE if tool == "baseline" else RDMABENCH, rb] + flags


def run_pair(tool, server_cmd, client_cmd, slow_server=False, tries=2):
    """Runs a server (pinned to CPU 0) and a client (CPU 1) against it and returns the
    client's output; a pair that fails is tried once more (a loaded emulated machine can
    start a server too late)."""
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
    log.seek(0)
    return log.read().decode(errors="replace")


def profile(tool, test, tag, slow_server=False):
    """(loop instructions per operation, passes per operation, the client's header)."""
    path = f"{OUT}/{test}-{tool}-{tag}.cg"
    cmd = command(tool, test, ITERS)
    output = run_pair(tool, cmd, CALLGRIND + [f"--callgrind-out-file={path}"] + cmd, slow_server)
    return loop_figures(Profile(path), tool, test) + (header(output),)


def header(output):
    """The parameters a client's header prints: {name: value}; a line of two columns
    (`Dual-port : OFF\t\tDevice : rxe0`) gives both."""
    found = {}
    for line in output.splitlines():
        for part in line.split("\t\t"):
            m = HEADER_LINE.match(part if part.startswith(" ") else " " + part.strip())
            if m and m.group(1) in PARAMETERS:
                found[m.group(1)] = m.group(2).strip()
    return found


def parameters_differ(headers):
    """The parameters both clients print with different values, as text ('' if none; a
    pair of headers with no parameter in common cannot be compared, and says so)."""
    p, r = headers["perftest"], headers["rdmabench"]
    common = [k for k in PARAMETERS if k in p and k in r]
    if not common:
        return f"no parameter found in both headers (perftest: {p}, rdmabench: {r})"
    return "; ".join(f"{k}: perftest {p[k]}, rdmabench {r[k]}" for k in common if p[k] != r[k])


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
    partial = partial_run(ROUNDS, DEFAULT_ROUNDS, ",".join(ONLY))
    if ITERS != 3000:
        partial = ", ".join(filter(None, [partial, f"BENCH_ITERS={ITERS}"]))
    verdicts = Verdicts("instructions", partial)
    rows = {}
    headers = {}
    for test in TESTS:
        if ONLY and test not in ONLY:
            continue
        points = {t: [] for t in TOOLS}
        for rnd in range(ROUNDS + 1):
            slow = rnd == ROUNDS  # the last round slows the server on purpose
            # Rotate which goes first, so drift cancels over the rounds.
            order = TOOLS[rnd % len(TOOLS):] + TOOLS[:rnd % len(TOOLS)]
            for tool in order:
                cost, passes, params = profile(tool, test, "slowed" if slow else f"r{rnd + 1}", slow)
                points[tool].append((cost, passes))
                headers.setdefault(test, {}).setdefault(tool, params)
                print(f"{test} {tool} {'slowed peer' if slow else f'round {rnd + 1}'}: "
                      f"loop {cost:.1f} instructions/op, {passes:.3f} passes/op", flush=True)
        for tool in TOOLS:
            c = slope(points[tool])
            # One pass per operation finds the answer (a bandwidth loop's innermost
            # loop can run less than once per message: its fewest then).
            least = min(1.0, min(passes for _, passes in points[tool]))
            work = [cost - c * (passes - least) for cost, passes in points[tool]]
            idle = statistics.median(c * (passes - least) for _, passes in points[tool][:-1])
            rows[(test, tool)] = (points[tool], c, work, idle)
    print()
    print(f"{'test':<11} {'tool':<10} {'loop/op':>8} {'passes':>7} {'per pass':>8} {'work/op':>8} {'spread':>7}")
    for test in TESTS:
        if (test, "perftest") not in rows:
            continue
        medians = {}
        for tool in TOOLS:
            points, c, work, _ = rows[(test, tool)]
            plain = points[:-1]
            medians[tool] = statistics.median(work)
            spread = (max(work) - min(work)) / medians[tool]
            print(f"{test:<11} {tool:<10} {statistics.median(p[0] for p in plain):>8.1f} "
                  f"{statistics.median(p[1] for p in plain):>7.3f} {c:>8.1f} {medians[tool]:>8.1f} {spread:>6.1%}")
        ratio = medians["rdmabench"] / medians["perftest"]
        word = verdicts.judge(f"{test} work per operation, rdmabench/perftest", round(ratio, 3), "<= 1.00",
                              ratio <= 1.0)
        before = f"  (baseline {medians['baseline'] / medians['perftest']:.3f})" if BASELINE else ""
        print(f"{test:<11} {'ratio':<10} {'':>8} {'':>7} {'':>8} {ratio:>8.3f}  target <= 1.00 {word}{before}")
    print()
    print("Idle passes (polls that found nothing), left out of the work above: each tool's price of one,")
    print("the instructions per operation its rounds spent in them (median), and the price's ratio.")
    for test in TESTS:
        if (test, "perftest") not in rows:
            continue
        (_, cp, _, idle_p), (_, cr, _, idle_r) = rows[(test, "perftest")], rows[(test, "rdmabench")]
        prices = f"perftest {cp:.1f}/pass ({idle_p:.1f}/op idle), rdmabench {cr:.1f}/pass ({idle_r:.1f}/op idle)"
        figure = f"{test} price of an idle pass, rdmabench/perftest"
        if cp == 0 and cr == 0:
            print(f"{test:<11} idle pass: {prices}: neither tool's passes varied (no idle pass to price)")
        elif cp == 0 or cr == 0:
            zero = "perftest" if cp == 0 else "rdmabench"
            word = verdicts.judge(figure, "unknown", "<= 1.00", False, f"slope 0 for {zero} only")
            print(f"{test:<11} idle pass: {prices}: slope 0 for {zero} only, its price unknown  target <= 1.00 {word}")
        else:
            word = verdicts.judge(figure, round(cr / cp, 3), "<= 1.00", cr <= cp)
            print(f"{test:<11} idle pass: {prices}: ratio {cr / cp:.3f}  target <= 1.00 {word}")
    print()
    for test, both in headers.items():
        differ = parameters_differ(both)
        shown = ", ".join(f"{k} {v}" for k, v in both["rdmabench"].items())
        word = verdicts.judge(f"{test} parameters in effect, the same in both", "differ" if differ else "same",
                              "same", not differ, differ)
        print(f"{test:<11} parameters: {differ or shown}: {word}")
    print()
    print(f"{'client':<26} " + " ".join(f"{t + ' KiB':>14}" for t in TOOLS) + f" {'ratio':>6}")
    for pt, rb in (("ib_write_lat", "write-lat"), ("ib_read_lat", "read-lat"), ("ib_send_lat", "send-lat"),
                   ("ib_atomic_lat", "atomic-lat"), ("ib_write_bw", "write-bw")):
        if ONLY and not any(t.split("_")[0] == rb.split("-")[0] for t in ONLY):
            continue
        kib = {tool: statistics.median(peak_rss(tool, (pt, rb)) for _ in range(ROUNDS)) for tool in TOOLS}
        ratio = kib["rdmabench"] / kib["perftest"]
        extra = round(kib["rdmabench"] - kib["perftest"])
        label = rb + (" -a -n 200" if rb == "write-bw" else " (defaults)")
        # Issue #38's target: a fixed cost (clap, serde) up to 1 MiB, never growth with -n.
        word = verdicts.judge(f"{label} peak RSS, rdmabench - perftest", f"{extra:+d} KiB", "<= +1024 KiB",
                              extra <= 1024)
        print(f"{label:<26} " + " ".join(f"{kib[t]:>14.0f}" for t in TOOLS)
              + f" {ratio:>6.3f}  {extra:+d} KiB, target <= +1024 KiB {word}")
    print(text_order(RDMABENCH))
    version = subprocess.run(["ib_write_bw", "--version"], capture_output=True, text=True).stdout.strip()
    about = (f"{ROUNDS} rounds and one with the server slowed under valgrind, -n {ITERS}, client under "
             f"callgrind on CPU 1, server on CPU 0; perftest {version}; medians; spread = (max - min) / median of work"
             + (f"; baseline = {BASELINE}" if BASELINE else ""))
    print(f"\n{about}")
    verdicts.finish(about)


main()
