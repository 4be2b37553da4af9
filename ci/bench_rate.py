"""Runs inside the lab (ci/bench-rate): the message rate of 64 B write and send bandwidth
runs over two QPs, interleaved in one boot: perftest (`-q 2`, both QPs on one thread),
rdmabench `--threads 1` (the same) and rdmabench `--threads 2` (a QP a thread, both
sides); prints medians, the ratios judged (>= 1.3x) and, for every run, each side's CPU
time and how busy the guest was, which says whether a second thread had a CPU to run on.

No side is pinned with taskset (ci/bench-vs-perftest pins server and client to a CPU
each): a thread can only add rate on a CPU its process may use. The guest's 2 vCPUs run
both ends and soft-RoCE's kernel work, whose share of the guest (`/proc/stat`) is charged
to no process."""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts, await_listening, partial_run, table_row  # noqa: E402

# The bench's rounds, fixed before the run (a rerun reruns all of them).
DEFAULT_ROUNDS = 5
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
ITERS = os.environ.get("BENCH_ITERS", "20000")
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
SIZE = 64
FLAGS = ["-d", DEV, "-x", "1", "-s", str(SIZE), "-q", "2", "-n", ITERS]
RDMABENCH = os.environ.get("RDMABENCH", "target/release/rdmabench")
ONLY = os.environ.get("BENCH_ONLY", "")  # "write" or "send": just that verb
TARGET = 1.3


def guest_cpu():
    """(busy, total) jiffies of the whole guest, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        cols = [int(c) for c in f.readline().split()[1:]]
    idle = cols[3] + cols[4]  # idle + iowait
    return sum(cols) - idle, sum(cols)


def reap(pid, seconds):
    """Waits up to `seconds` for `pid` (killed past them); its user + system CPU seconds
    (wait4's rusage) and exit status."""
    deadline = time.monotonic() + seconds
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            deadline = float("inf")
        time.sleep(0.02)


def pair(server_cmd, client_cmd, port):
    """One run: the server, then the client once it listens. Returns (client output,
    server CPU s, client CPU s, guest CPUs busy over the client's run, its wall s)."""
    server = subprocess.Popen(server_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    await_listening(server, port, 30)
    time.sleep(0.2)
    busy0, total0 = guest_cpu()
    started = time.monotonic()
    client = subprocess.Popen(client_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = client.stdout.read()
    client_cpu, client_rc = reap(client.pid, 600)
    wall = time.monotonic() - started
    busy1, total1 = guest_cpu()
    server_cpu, _ = reap(server.pid, 60)
    if client_rc != 0:
        sys.exit(f"bench: {' '.join(client_cmd)} failed:\n{out}")
    cpus = os.cpu_count() or 1
    guest_busy = (busy1 - busy0) / max(total1 - total0, 1) * cpus
    return out, server_cpu, client_cpu, guest_busy, wall


def perftest(verb):
    tool = [f"ib_{verb}_bw"] + FLAGS
    return pair(tool, tool + ["127.0.0.1"], 18515)


def ours(threads):
    def run(verb):
        cmd = [RDMABENCH, f"{verb}-bw"] + FLAGS + ["--threads", str(threads)]
        return pair(cmd, cmd + ["127.0.0.1"], 18520)

    return run


CONTESTANTS = [("perftest", perftest), ("rdmabench T=1", ours(1)), ("rdmabench T=2", ours(2))]
VERBS = [v for v in ("write", "send") if not ONLY or v in ONLY.split(",")]


def main():
    results = {}
    for rnd in range(1, ROUNDS + 1):
        for verb in VERBS:
            # Rotate which goes first, so drift cancels over the rounds.
            k = rnd % len(CONTESTANTS)
            for name, fn in CONTESTANTS[k:] + CONTESTANTS[:k]:
                out, server_cpu, client_cpu, busy, wall = fn(verb)
                rate = table_row(out, SIZE)[2]
                results.setdefault((verb, name), []).append((rate, server_cpu, client_cpu, busy, wall))
                print(
                    f"round {rnd} {verb} {name}: {rate:.4f} Mpps; CPU s server {server_cpu:.2f} "
                    f"client {client_cpu:.2f}; guest busy {busy:.2f} of {os.cpu_count()} CPUs over {wall:.1f} s",
                    flush=True,
                )
    print()
    verdicts = Verdicts("rate", partial_run(ROUNDS, DEFAULT_ROUNDS, ONLY))
    print(f"{'test':<6} {'contestant':<14} {'Mpps':>8} {'srv CPU s':>9} {'cli CPU s':>9} {'guest busy':>10} {'wall s':>7}")
    med = {}
    for verb in VERBS:
        for name, _ in CONTESTANTS:
            rows = results[(verb, name)]
            m = [statistics.median(col) for col in zip(*rows)]
            med[(verb, name)] = m
            print(f"{verb:<6} {name:<14} {m[0]:>8.4f} {m[1]:>9.2f} {m[2]:>9.2f} {m[3]:>10.2f} {m[4]:>7.1f}")
            if name != "perftest":
                verdicts.judge(f"{verb} {name} server CPU s", round(m[1], 2), "", None)
                verdicts.judge(f"{verb} {name} client CPU s", round(m[2], 2), "", None)
                verdicts.judge(f"{verb} {name} guest CPUs busy", round(m[3], 2), "", None)
    print()
    for verb in VERBS:
        t2 = med[(verb, "rdmabench T=2")][0]
        for base in ("perftest", "rdmabench T=1"):
            ratio = t2 / med[(verb, base)][0]
            # A miss is said with what the guest had left: a second thread needs a CPU.
            busy = med[(verb, base)][3]
            cpus = os.cpu_count() or 1
            note = (
                f"the guest's {cpus} CPUs were {busy:.2f} busy with {base}, "
                f"{med[(verb, 'rdmabench T=2')][3]:.2f} with T=2"
            )
            met = ratio >= TARGET
            word = verdicts.judge(f"{verb}_rate T=2/{base}", round(ratio, 3), f">= {TARGET}", met, "" if met else note)
            print(f"{verb:<6} rdmabench T=2 / {base:<14} {ratio:>6.3f}  >= {TARGET} {word}{'' if met else ' (' + note + ')'}")
    version = subprocess.run(["ib_write_bw", "--version"], capture_output=True, text=True).stdout.strip()
    about = (
        f"{ROUNDS} rounds, medians, nothing pinned by taskset; perftest {version}; flags {' '.join(FLAGS)}; "
        f"MsgRate of the {SIZE} B row; CPU s: each side's process, user + system (wait4), start to exit; "
        f"guest busy: /proc/stat over the client's run, in CPUs of {os.cpu_count()}"
    )
    print(f"\n{about}")
    verdicts.finish(about)


main()
