"""Runs inside the lab (ci/bench-qualify): `qualify quick` with the baseline build
(BENCH_BASELINE: fixed counts, three runs a point) and this one (sequential stopping),
each against its own `serve` on the guest, interleaved: every round qualifies a clean
lab, then one with lo shaped to 40 Mbit/s, and rotates which build goes first. Judged:
the medians' ratio over both conditions (>= 1.5x, issue #56) and, in every round, the
same verdict from both builds (exit status, pass, and the points that failed)."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts, await_listening, partial_run  # noqa: E402

DEFAULT_ROUNDS = 2
ROUNDS = int(os.environ.get("BENCH_ROUNDS", str(DEFAULT_ROUNDS)))
BUILDS = [("before", os.environ["BENCH_BASELINE"], 18600), ("after", "target/release/rdmabench", 18601)]
CONDITIONS = ["clean", "shaped"]
TARGET = 1.5
OUT = "target/bench/qualify-runs"


def shape(on):
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
    if on:
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "rate", "40mbit"], check=True)


def qualify(binary, port, out):
    """One `qualify quick`: (wall s, exit status, runs made, verdict) where the verdict is
    what must not change: the exit status, pass, and the failed points (as the report
    names them)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [binary, "qualify", "quick", "--server", "127.0.0.1", "-p", str(port), "--no-store", "--out", out]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench: {' '.join(cmd)} did not end within 1200 s")
    wall = time.monotonic() - started
    try:
        with open(os.path.join(out, "qualify.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench: {' '.join(cmd)} wrote no report ({e}), exit {done.returncode}:\n{done.stdout}{done.stderr}")
    runs = sum(len(p["runs"]) for p in doc["points"])
    verdict = doc["verdict"]
    return wall, done.returncode, runs, (done.returncode, verdict["pass"], tuple(sorted(verdict["failed_points"])))


def main():
    servers = []
    for _, binary, port in BUILDS:
        s = subprocess.Popen([binary, "serve", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        await_listening(s, port, 30)
        servers.append(s)
    runs = {}
    same = {c: True for c in CONDITIONS}
    try:
        for rnd in range(1, ROUNDS + 1):
            for cond in CONDITIONS:
                shape(cond == "shaped")
                order = BUILDS if rnd % 2 else BUILDS[::-1]
                seen = {}
                for name, binary, port in order:
                    wall, rc, made, verdict = qualify(binary, port, os.path.join(OUT, f"{rnd}-{cond}-{name}"))
                    runs.setdefault((cond, name), []).append((wall, made))
                    seen[name] = verdict
                    print(f"round {rnd} {cond:<6} {name:<6}: {wall:6.1f} s, {made:2} runs, exit {rc}, "
                          f"pass {verdict[1]}, failed points {list(verdict[2]) or 'none'}", flush=True)
                shape(False)
                if seen["before"] != seen["after"]:
                    same[cond] = False
                    print(f"round {rnd} {cond}: the verdicts differ: before {seen['before']}, after {seen['after']}")
    finally:
        shape(False)
        for s in servers:
            s.kill()
    print()
    verdicts = Verdicts("qualify", partial_run(ROUNDS, DEFAULT_ROUNDS, ""))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(n for _, n in v)) for k, v in runs.items()}
    print(f"{'lab':<7} {'before s':>9} {'runs':>5} {'after s':>8} {'runs':>5} {'faster':>7}")
    for cond in CONDITIONS:
        (b, bn), (a, an) = med[(cond, "before")], med[(cond, "after")]
        print(f"{cond:<7} {b:>9.1f} {bn:>5.0f} {a:>8.1f} {an:>5.0f} {b / a:>6.2f}x")
        verdicts.judge(f"quick {cond} before/after wall", round(b / a, 3), "", None)
        word = verdicts.judge(f"quick {cond}: the same verdicts", "yes" if same[cond] else "no", "every round", same[cond])
        print(f"{cond:<7} the same verdicts in every round: {word}")
    before = sum(med[(c, "before")][0] for c in CONDITIONS)
    after = sum(med[(c, "after")][0] for c in CONDITIONS)
    ratio = before / after
    word = verdicts.judge("quick wall before/after, both labs", round(ratio, 3), f">= {TARGET}", ratio >= TARGET)
    print(f"both    {before:>9.1f}       {after:>8.1f}       {ratio:>6.2f}x  >= {TARGET} {word}")
    about = (f"{ROUNDS} rounds, medians of wall time; `qualify quick --server 127.0.0.1 --no-store`, "
             f"each build against its own serve; shaped: netem rate 40mbit on lo; baseline {BUILDS[0][1]}")
    print(f"\n{about}")
    verdicts.finish(about)


main()
