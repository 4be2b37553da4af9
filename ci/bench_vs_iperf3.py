"""Runs inside the lab (ci/bench-vs-iperf3): iperf3 and qperf against rdmabench's TCP
tests, interleaved in one boot, server and client pinned as for the RDMA benchmark;
prints medians and the rdmabench/reference ratios."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import Verdicts, partial_run

# The bench's rounds, fixed before the run (a rerun reruns all of them).
DEFAULT_ROUNDS = 3
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
SECS = os.environ.get("BENCH_SECS", "3")
RDMABENCH = os.environ.get("RDMABENCH", "target/release/rdmabench")
MIB = 1048576.0


def pinned(cpu, cmd):
    return ["taskset", "-c", str(cpu)] + cmd


def pair(server_cmd, client_cmd):
    server = subprocess.Popen(pinned(0, server_cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    client = subprocess.run(pinned(1, client_cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if client.returncode != 0:
        sys.exit(f"bench: {' '.join(client_cmd)} failed:\n{client.stdout}")
    return client.stdout


def ours(test, flags):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [RDMABENCH, test, "-D", SECS, "-f", "0"] + flags
        pair(cmd, cmd + ["--json", f.name, "127.0.0.1"])
        return json.load(open(f.name))["results"][0]


def iperf3_bw():
    out = pair(["iperf3", "-s", "-1", "-p", "5201"],
               ["iperf3", "-c", "127.0.0.1", "-p", "5201", "-l", "64K", "-t", SECS, "-J"])
    end = json.loads(out)["end"]
    return end["sum_sent"]["bits_per_second"] / 8 / MIB, end["sum_received"]["bits_per_second"] / 8 / MIB


UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "s": 1e6}


def qperf_lat():
    server = subprocess.Popen(pinned(0, ["qperf"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        out = subprocess.run(pinned(1, ["qperf", "127.0.0.1", "-m", "2", "-t", SECS, "tcp_lat"]),
                             capture_output=True, text=True, timeout=120).stdout
    finally:
        server.kill()
        server.wait()
    m = re.search(r"latency\s*=\s*([0-9.]+)\s*(ns|us|ms|sec|s)\b", out)
    if not m:
        sys.exit(f"bench: no latency in qperf's output:\n{out}")
    return float(m.group(1)) * UNITS[m.group(2)]


def main():
    res = {}
    for rnd in range(1, ROUNDS + 1):
        steps = [
            ("tcp_bw", "iperf3", lambda: iperf3_bw()),
            ("tcp_bw", "rdmabench", lambda: ours("tcp-bw", ["-s", "64K"])),
            ("tcp_lat", "qperf", qperf_lat),
            ("tcp_lat", "rdmabench", lambda: ours("tcp-lat", ["-s", "2"])),
        ]
        if rnd % 2 == 0:  # alternate which tool goes first, so drift cancels
            steps = [steps[1], steps[0], steps[3], steps[2]]
        for test, tool, fn in steps:
            v = fn()
            if tool == "iperf3":
                sent, received = v
                res.setdefault((test, tool), []).append(sent)
                print(f"round {rnd} {test} iperf3: sender {sent:.2f} MiB/s, receiver {received:.2f} MiB/s", flush=True)
            elif tool == "rdmabench" and test == "tcp_bw":
                bw = v["bw"]["avg_bytes_per_sec"] / MIB
                res.setdefault((test, tool), []).append(bw)
                cpu = v["cpu"]
                print(f"round {rnd} {test} rdmabench: {bw:.2f} MiB/s (client process {cpu['client']['process_percent']:.0f} %, "
                      f"server {cpu['server']['process_percent']:.0f} %)", flush=True)
            elif tool == "rdmabench":
                lat = v["lat"]["t_avg_us"]
                res.setdefault((test, tool), []).append(lat)
                print(f"round {rnd} {test} rdmabench: t_avg {lat:.2f} usec (t_typical {v['lat']['t_typical_us']:.2f})", flush=True)
            else:
                res.setdefault((test, tool), []).append(v)
                print(f"round {rnd} {test} qperf: latency {v:.2f} usec", flush=True)
    print()
    print(f"{'test':<8} {'reference':>22} {'rdmabench':>14} {'ratio':>7}  target")
    verdicts = Verdicts("vs-iperf3", partial_run(ROUNDS, DEFAULT_ROUNDS, "") or ("" if SECS == "3" else f"BENCH_SECS={SECS}"))
    for test, ref, unit, better in (("tcp_bw", "iperf3", "MiB/s", "higher"), ("tcp_lat", "qperf", "usec", "lower")):
        p = statistics.median(res[(test, ref)])
        r = statistics.median(res[(test, "rdmabench")])
        ratio = r / p
        if better == "higher":
            target, met = ">= 0.95", ratio >= 0.95
        else:
            target, met = "<= 1.05", ratio <= 1.05
        word = verdicts.judge(f"{test} rdmabench/{ref}", round(ratio, 3), target, met)
        print(f"{test:<8} {ref:>6} {p:>9.2f} {unit:<5} {r:>8.2f} {unit:<5} {ratio:>7.3f}  {target} {word}")
    about = (f"{ROUNDS} rounds, medians, {SECS} s each, server on CPU 0, client on CPU 1. tcp_bw: 1 stream, "
             "64 KiB writes, iperf3's sender figure against rdmabench's BW average; tcp_lat: 2 B, "
             "qperf's latency (average, half round trip) against rdmabench's t_avg.")
    print(f"\n{about}")
    verdicts.finish(about)


main()
