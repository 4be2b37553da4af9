"""What the lab's benchmark scripts share: running a client against a started server,
reading a row of perftest's (and rdmabench's) table, and judging and recording the
targets (Verdicts)."""
import json
import os
import re
import subprocess
import sys
import time

NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?")


def client_against(server, client_cmd):
    """Runs `client_cmd` while `server` (a Popen) serves; returns the client's output, or
    ends the benchmark with it when the client failed."""
    client = subprocess.run(client_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
    if client.returncode != 0:
        sys.exit(f"bench: {' '.join(client_cmd)} failed:\n{client.stdout}")
    return client.stdout


def table_row(output, size):
    """The numbers after `#bytes #iterations` on the row of `size`. perftest sometimes
    appends a warning to the row itself ("0.000596ethernet_read_keys: ..."): each column
    gives its leading number."""
    for line in output.splitlines():
        cols = line.split()
        if cols and cols[0] == str(size) and len(cols) >= 5:
            return [float(NUMBER.match(c).group(0)) for c in cols[2:] if NUMBER.match(c)]
    sys.exit(f"bench: no {size}-byte row in:\n{output}")


def await_listening(server, port, seconds):
    """Waits until `server` (a Popen) listens on `port`, exits, or `seconds` pass."""
    deadline = time.time() + seconds
    while not listening(port) and time.time() < deadline and server.poll() is None:
        time.sleep(0.05)


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


class Verdicts:
    """The targets a bench judges, each printed `met` or `MISSED` where it is shown, then
    written together to target/bench/BENCH.json for ci/results-table. `finish` ends the
    bench: exit 1 when a target was missed. A run of part of the bench (BENCH_ONLY, or
    rounds other than the bench's own) is marked partial: ci/results-table takes no
    figure from it, so a miss is answered by a whole new run, never by rerunning it alone."""

    def __init__(self, bench, partial=""):
        self.bench, self.partial, self.rows = bench, partial, []

    def judge(self, figure, value, target, met, note=""):
        """Records one figure against its target (met None: a figure shown, not judged);
        returns the word to print."""
        judged = None if met is None else bool(met)
        self.rows.append({"figure": figure, "value": value, "target": target, "met": judged, "note": note})
        return {True: "met", False: "MISSED", None: "shown"}[judged]

    def finish(self, about):
        missed = [r["figure"] for r in self.rows if r["met"] is False]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        record = {
            "bench": self.bench,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit,
            "partial": self.partial,
            "about": about,
            "rows": self.rows,
        }
        os.makedirs("target/bench", exist_ok=True)
        with open(f"target/bench/{self.bench}.json", "w") as f:
            json.dump(record, f, indent=1)
        if self.partial:
            print(f"partial run ({self.partial}): not a result (ci/results-table skips it)")
        print("all targets met" if not missed else f"some targets missed: {', '.join(missed)}")
        sys.exit(1 if missed else 0)


def partial_run(rounds, default_rounds, only):
    """Why a run is not the bench's whole run ('' when it is)."""
    why = [f"BENCH_ONLY={only}"] if only else []
    if rounds != default_rounds:
        why.append(f"BENCH_ROUNDS={rounds}, not {default_rounds}")
    return ", ".join(why)
