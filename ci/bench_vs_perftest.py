"""Runs inside the lab (ci/bench-vs-perftest): perftest and rdmabench interleaved in one
boot, same flags, several rounds; prints medians and the rdmabench/perftest ratios."""
import os
import statistics
import subprocess
import time

from bench_common import client_against, table_row

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "9"))
ITERS = os.environ.get("BENCH_ITERS", "2000")
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
FLAGS = ["-d", DEV, "-x", "1", "-n", ITERS]
RDMABENCH = os.environ.get("RDMABENCH", "target/release/rdmabench")
ONLY = os.environ.get("BENCH_ONLY", "")  # e.g. "read_lat": run just that test
# BENCH_WIRE=1: also each tool's client against the other's server (rdmabench with
# --perftest), measured by the client, next to perftest against perftest.
WIRE = os.environ.get("BENCH_WIRE", "") == "1"


# Server on CPU 0, client on CPU 1, the same for both tools: the emulated machine's
# scheduling otherwise adds more noise than the differences being measured.
PIN = ["taskset", "-c"]


def listening(port):
    """Whether a TCP socket listens on `port` (/proc/net/tcp and tcp6, state 0A)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for r in rows:
            cols = r.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def pair(server_cmd, client_cmd, port):
    server_cmd = PIN + ["0"] + server_cmd
    client_cmd = PIN + ["1"] + client_cmd
    server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # perftest's client does not retry a refused connection: start it once the server
    # listens (a loaded emulated machine can take seconds to start a process).
    deadline = time.time() + 30
    while not listening(port) and time.time() < deadline and server.poll() is None:
        time.sleep(0.05)
    time.sleep(0.2)
    return client_against(server, client_cmd)


def perftest(verb, kind):
    tool = f"ib_{verb}_{kind}"
    return pair([tool] + FLAGS, [tool] + FLAGS + ["127.0.0.1"], 18515)


def ours(verb, kind):
    cmd = [RDMABENCH, f"{verb}-{kind}"] + FLAGS
    return pair(cmd, cmd + ["127.0.0.1"], 18520)


def ours_to_perftest(verb, kind):
    """rdmabench's client against perftest's server."""
    tool = f"ib_{verb}_{kind}"
    ours_cmd = [RDMABENCH, f"{verb}-{kind}", "--perftest"] + FLAGS
    return pair([tool] + FLAGS, ours_cmd + ["127.0.0.1"], 18515)


def perftest_to_ours(verb, kind):
    """perftest's client against rdmabench's server."""
    tool = f"ib_{verb}_{kind}"
    ours_cmd = [RDMABENCH, f"{verb}-{kind}", "--perftest"] + FLAGS
    return pair(ours_cmd, [tool] + FLAGS + ["127.0.0.1"], 18515)


CONTESTANTS = [("perftest", perftest), ("rdmabench", ours)]
if WIRE:
    CONTESTANTS += [("rdmabench->perftest", ours_to_perftest), ("perftest->rdmabench", perftest_to_ours)]


def main():
    results = {}
    for rnd in range(1, ROUNDS + 1):
        for verb in ("write", "read", "send"):
            for kind, size in (("bw", 65536), ("lat", 2)):
                if ONLY and ONLY != f"{verb}_{kind}":
                    continue
                # Rotate which goes first, so drift cancels over the rounds.
                k = rnd % len(CONTESTANTS)
                order = CONTESTANTS[k:] + CONTESTANTS[:k]
                for name, fn in order:
                    cols = table_row(fn(verb, kind), size)
                    # bw: BW average (MiB/s) is the 2nd value; lat: t_typical is the 3rd.
                    value = cols[1] if kind == "bw" else cols[2]
                    results.setdefault((verb, kind, name), []).append(value)
                    print(f"round {rnd} {verb}_{kind} {name}: {value:.2f}", flush=True)
    print()
    print(f"{'test':<12} {'perftest':>12} {'rdmabench':>12} {'ratio':>7}  {'best-of-rounds':>14}  target (on medians)")
    ok = True
    for verb in ("write", "read", "send"):
        for kind in ("bw", "lat"):
            if (verb, kind, "perftest") not in results:
                continue
            ps, rs = results[(verb, kind, "perftest")], results[(verb, kind, "rdmabench")]
            p, r = statistics.median(ps), statistics.median(rs)
            ratio = r / p
            if kind == "bw":
                # best round: the highest bandwidth each tool reached
                best = max(rs) / max(ps)
                target, met, unit = ">= 0.95", ratio >= 0.95, "MiB/s"
            else:
                # best round: the lowest typical latency each tool reached
                best = min(rs) / min(ps)
                target, met, unit = "<= 1.05", ratio <= 1.05, "usec"
            ok &= met
            print(
                f"{verb + '_' + kind:<12} {p:>6.2f} {unit:<5} {r:>6.2f} {unit:<5} {ratio:>7.3f}  {best:>14.3f}  "
                f"{target} {'met' if met else 'MISSED'}"
            )
            for name, _ in CONTESTANTS[2:]:
                w = statistics.median(results[(verb, kind, name)])
                wratio = w / p
                wmet = wratio >= 0.95 if kind == "bw" else wratio <= 1.05
                ok &= wmet
                print(
                    f"  {name:<21} {w:>6.2f} {unit:<5} ratio to perftest-perftest {wratio:.3f}  "
                    f"{target} {'met' if wmet else 'MISSED'}"
                )
    print(f"\n{ROUNDS} rounds, medians, server pinned to CPU 0 and client to CPU 1; perftest {subprocess.run(['ib_write_bw', '--version'], capture_output=True, text=True).stdout.strip()}; "
          f"flags {' '.join(FLAGS)}; 64 KiB bandwidth (BW average), 2 B latency (t_typical)")
    print("all targets met" if ok else "some targets missed")


main()
