"""Runs inside the lab (ci/bench-memory): whether memory stays flat over long runs, for
rdmabench and, where perftest has the same run, perftest, in one boot:

- a client's `write-lat -n 10000000` (BENCH_LAT_ITERS);
- a client's `write-bw --run_infinitely -D 10` for 10 minutes (BENCH_MINUTES), then SIGINT;
- one `serve` through 2,000 short tests (BENCH_SERVE_TESTS: `write-lat -n 100` clients in
  a row; rdmabench only, perftest has no server that outlives a test).

Each process's resident set is sampled once a second from /proc/PID/status (VmRSS, and
VmHWM at the end). Targets: growth after the first minute (the largest RSS past 60 s
over the RSS at 60 s; for serve, over the RSS after the first 10 % of its tests) <= 1 %;
rdmabench's peak RSS <= perftest's + 1 MiB for the same client run.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts, await_listening, partial_run  # noqa: E402

DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
RDMABENCH = os.environ.get("BENCH_RDMABENCH", "target/release/rdmabench")
LAT_ITERS = int(os.environ.get("BENCH_LAT_ITERS", "10000000"))
MINUTES = float(os.environ.get("BENCH_MINUTES", "10"))
SERVE_TESTS = int(os.environ.get("BENCH_SERVE_TESTS", "2000"))
SETTLE = 60.0  # seconds before growth is judged
PORTS = {"perftest": 18515, "rdmabench": 18520}
FLAGS = ["-d", DEV, "-x", "1"]


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def sample(proc, stop_after=None, stop=signal.SIGINT):
    """[(seconds, VmRSS KiB)] once a second until `proc` ends (or `stop_after` seconds,
    then `stop` is sent), and its last VmHWM."""
    start, series, hwm = time.time(), [], 0
    while proc.poll() is None:
        rss = status_kib(proc.pid, "VmRSS")
        hwm = max(hwm, status_kib(proc.pid, "VmHWM") or 0)
        if rss:
            series.append((time.time() - start, rss))
        if stop_after is not None and time.time() - start >= stop_after:
            proc.send_signal(stop)
            stop_after = None
        time.sleep(1.0)
    return series, hwm


def growth(series, settle=SETTLE):
    """(RSS at `settle` s, the largest after it, growth as a fraction)."""
    after = [r for t, r in series if t >= settle]
    if not after:
        return None, None, None
    base, top = after[0], max(after)
    return base, top, (top - base) / base


def client_run(tool, args, stop_after=None):
    binary = [args[0]] if tool == "perftest" else [RDMABENCH, args[1]]
    cmd = binary + FLAGS + args[2:]
    server = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    await_listening(server, PORTS[tool], 60)
    time.sleep(0.2)
    client = subprocess.Popen(["taskset", "-c", "1"] + cmd + ["127.0.0.1"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    series, hwm = sample(client, stop_after)
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    return series, hwm


def serve_run():
    serve = subprocess.Popen(["taskset", "-c", "0", RDMABENCH, "serve"] + FLAGS[:2],
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    await_listening(serve, PORTS["rdmabench"], 60)
    series, start = [], time.time()
    for k in range(SERVE_TESTS):
        subprocess.run(["taskset", "-c", "1", RDMABENCH, "write-lat"] + FLAGS + ["-n", "100", "127.0.0.1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=120)
        rss = status_kib(serve.pid, "VmRSS")
        if rss:
            series.append((k, rss))
    hwm = status_kib(serve.pid, "VmHWM") or 0
    serve.send_signal(signal.SIGINT)
    serve.wait(timeout=30)
    print(f"serve: {SERVE_TESTS} tests in {time.time() - start:.0f} s", flush=True)
    return series, hwm


def main():
    whole = LAT_ITERS == 10000000 and MINUTES == 10 and SERVE_TESTS == 2000
    verdicts = Verdicts("memory", "" if whole else partial_run(0, 0, "BENCH_LAT_ITERS/MINUTES/SERVE_TESTS changed"))
    runs = {
        "write-lat -n %d" % LAT_ITERS: (["ib_write_lat", "write-lat", "-s", "2", "-n", str(LAT_ITERS)], None),
        "write-bw --run_infinitely %g min" % MINUTES:
            (["ib_write_bw", "write-bw", "--run_infinitely", "-D", "10"], MINUTES * 60),
    }
    for label, (args, stop_after) in runs.items():
        peaks = {}
        for tool in ("perftest", "rdmabench"):
            series, hwm = client_run(tool, args, stop_after)
            base, top, g = growth(series)
            peaks[tool] = hwm
            shown = "n/a (ended within the first minute)" if g is None else f"{base} -> {top} KiB, {g:+.2%}"
            print(f"{label} {tool}: peak {hwm} KiB, after the first minute {shown}", flush=True)
            if tool == "rdmabench":
                verdicts.judge(f"{label} RSS growth after the first minute, rdmabench",
                               "n/a" if g is None else f"{g:+.2%}", "<= 1 %", g is not None and g <= 0.01,
                               "" if g is not None else "the run ended within its first minute")
        extra = peaks["rdmabench"] - peaks["perftest"]
        word = verdicts.judge(f"{label} peak RSS, rdmabench - perftest", f"{extra:+d} KiB", "<= +1024 KiB",
                              extra <= 1024)
        print(f"{label}: peak RSS rdmabench - perftest {extra:+d} KiB  target <= +1024 KiB {word}", flush=True)
    series, hwm = serve_run()
    settle = max(1, SERVE_TESTS // 10)
    base, top, g = growth(series, settle)
    shown = "n/a" if g is None else f"{g:+.2%}"
    word = verdicts.judge(f"serve through {SERVE_TESTS} tests: RSS growth after the first {settle}", shown, "<= 1 %",
                          g is not None and g <= 0.01)
    print(f"serve: peak {hwm} KiB, RSS after {settle} tests {base} KiB, largest after {top} KiB, {shown}  "
          f"target <= 1 % {word}")
    about = (f"client on CPU 1, server on CPU 0; RSS from /proc/PID/status once a second; write-lat -n {LAT_ITERS}, "
             f"write-bw --run_infinitely -D 10 for {MINUTES:g} min, serve through {SERVE_TESTS} write-lat -n 100 tests")
    print(f"\n{about}")
    verdicts.finish(about)


main()
