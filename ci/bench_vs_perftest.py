"""Runs inside the lab (ci/bench-vs-perftest): perftest and rdmabench interleaved in one
boot, same flags, several rounds; prints medians and the rdmabench/perftest ratios."""
import os
import statistics
import subprocess
import time

from bench_common import Verdicts, await_listening, client_against, partial_run, table_row

# The bench's rounds, fixed before the run (a rerun reruns all of them).
DEFAULT_ROUNDS = 9
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
ITERS = os.environ.get("BENCH_ITERS", "2000")
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
FLAGS = ["-d", DEV, "-x", "1", "-n", ITERS]
RDMABENCH = os.environ.get("RDMABENCH", "target/release/rdmabench")
ONLY = os.environ.get("BENCH_ONLY", "")  # e.g. "read_lat" or "write_rate,send_rate": just those
# BENCH_WIRE=1: also each tool's client against the other's server (rdmabench with
# --perftest), measured by the client, next to perftest against perftest.
WIRE = os.environ.get("BENCH_WIRE", "") == "1"


# Server on CPU 0, client on CPU 1, the same for both tools: the emulated machine's
# scheduling otherwise adds more noise than the differences being measured.
PIN = ["taskset", "-c"]


def pair(server_cmd, client_cmd, port):
    server_cmd = PIN + ["0"] + server_cmd
    client_cmd = PIN + ["1"] + client_cmd
    server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # perftest's client does not retry a refused connection: start it once the server
    # listens (a loaded emulated machine can take seconds to start a process).
    await_listening(server, port, 30)
    time.sleep(0.2)
    return client_against(server, client_cmd)


def perftest(verb, kind, extra):
    tool = f"ib_{verb}_{kind}"
    return pair([tool] + FLAGS + extra, [tool] + FLAGS + extra + ["127.0.0.1"], 18515)


def ours(verb, kind, extra):
    cmd = [RDMABENCH, f"{verb}-{kind}"] + FLAGS + extra
    return pair(cmd, cmd + ["127.0.0.1"], 18520)


def ours_to_perftest(verb, kind, extra):
    """rdmabench's client against perftest's server."""
    tool = f"ib_{verb}_{kind}"
    ours_cmd = [RDMABENCH, f"{verb}-{kind}", "--perftest"] + FLAGS + extra
    return pair([tool] + FLAGS + extra, ours_cmd + ["127.0.0.1"], 18515)


def perftest_to_ours(verb, kind, extra):
    """perftest's client against rdmabench's server."""
    tool = f"ib_{verb}_{kind}"
    ours_cmd = [RDMABENCH, f"{verb}-{kind}", "--perftest"] + FLAGS + extra
    return pair(ours_cmd, [tool] + FLAGS + extra + ["127.0.0.1"], 18515)


# (test, the tool's kind, message size, flags, the column compared, higher is better)
# rate: 2 B bandwidth runs, compared on MsgRate[Mpps] (the 3rd value after #bytes
# #iterations); bw on BW average; lat on t_typical.
TESTS = [
    (f"{verb}_{kind}", verb, tool_kind, size, extra, column, higher)
    for verb in ("write", "read", "send")
    for kind, tool_kind, size, extra, column, higher in (
        ("bw", "bw", 65536, [], 1, True),
        ("rate", "bw", 2, ["-s", "2"], 2, True),
        ("lat", "lat", 2, [], 2, False),
    )
    if kind != "rate" or verb != "read"
]


CONTESTANTS = [("perftest", perftest), ("rdmabench", ours)]
if WIRE:
    CONTESTANTS += [("rdmabench->perftest", ours_to_perftest), ("perftest->rdmabench", perftest_to_ours)]


def main():
    results = {}
    for rnd in range(1, ROUNDS + 1):
        for test, verb, kind, size, extra, column, _ in TESTS:
            if ONLY and test not in ONLY.split(","):
                continue
            # Rotate which goes first, so drift cancels over the rounds.
            k = rnd % len(CONTESTANTS)
            order = CONTESTANTS[k:] + CONTESTANTS[:k]
            for name, fn in order:
                value = table_row(fn(verb, kind, extra), size)[column]
                results.setdefault((test, name), []).append(value)
                print(f"round {rnd} {test} {name}: {value:.{4 if kind == 'bw' and size == 2 else 2}f}", flush=True)
    print()
    print(f"{'test':<12} {'perftest':>12} {'rdmabench':>12} {'ratio':>7}  {'best-of-rounds':>14}  target (on medians)")
    verdicts = Verdicts("vs-perftest" + ("-wire" if WIRE else ""), partial_run(ROUNDS, DEFAULT_ROUNDS, ONLY))
    for test, _, kind, _, _, _, higher in TESTS:
        if (test, "perftest") not in results:
            continue
        ps, rs = results[(test, "perftest")], results[(test, "rdmabench")]
        p, r = statistics.median(ps), statistics.median(rs)
        ratio = r / p
        # best round: the highest bandwidth or message rate, or the lowest typical
        # latency, each tool reached
        best = max(rs) / max(ps) if higher else min(rs) / min(ps)
        # bandwidth within 5 %; message rate at least perftest's; latency within 5 %
        floor = 1.00 if test.endswith("_rate") else 0.95
        met = ratio >= floor if higher else ratio <= 1.05
        target = f">= {floor:.2f}" if higher else "<= 1.05"
        unit = "Mpps" if test.endswith("_rate") else "MiB/s" if higher else "usec"
        word = verdicts.judge(f"{test} rdmabench/perftest", round(ratio, 3), target, met)
        digits = 4 if unit == "Mpps" else 2  # soft-RoCE's rates are hundredths of a Mpps
        print(
            f"{test:<12} {p:>6.{digits}f} {unit:<5} {r:>6.{digits}f} {unit:<5} {ratio:>7.3f}  {best:>14.3f}  "
            f"{target} {word}"
        )
        for name, _ in CONTESTANTS[2:]:
            w = statistics.median(results[(test, name)])
            wratio = w / p
            wmet = wratio >= floor if higher else wratio <= 1.05
            wword = verdicts.judge(f"{test} {name}/perftest", round(wratio, 3), target, wmet)
            print(f"  {name:<21} {w:>6.2f} {unit:<5} ratio to perftest-perftest {wratio:.3f}  {target} {wword}")
    version = subprocess.run(['ib_write_bw', '--version'], capture_output=True, text=True).stdout.strip()
    about = (f"{ROUNDS} rounds, medians, server pinned to CPU 0 and client to CPU 1; perftest {version}; "
             f"flags {' '.join(FLAGS)}; 64 KiB bandwidth (BW average), 2 B message rate (MsgRate), 2 B latency (t_typical)")
    print(f"\n{about}")
    verdicts.finish(about)


main()
