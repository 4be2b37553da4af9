"""Runs inside the lab (ci/text-order): each perftest-style test's client under callgrind
against a plain server, and writes every function of the rdmabench binary that executed,
by symbol, to src/text-order.txt (build.rs hands it to the linker)."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import client_against, listening  # noqa: E402
from callgrind_profile import Profile  # noqa: E402

BINARY = "target/release/rdmabench"
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
PORT = 18520
OUT = "target/text-order"
TESTS = ["write-lat", "read-lat", "send-lat", "atomic-lat",
         "write-bw", "write-bw -a -n 200", "read-bw", "send-bw", "atomic-bw"]
CALLGRIND = ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=yes",
             "--compress-strings=no", "--compress-pos=no"]


def profile(test, path):
    cmd = [BINARY] + test.split() + ["-d", DEV, "-x", "1", "-p", str(PORT)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not listening(PORT) and time.time() < deadline and server.poll() is None:
        time.sleep(0.05)
    client_against(server, CALLGRIND + [f"--callgrind-out-file={path}"] + cmd + ["127.0.0.1"])


def main():
    ran = set()
    for i, test in enumerate(TESTS):
        path = f"{OUT}/{i}.cg"
        profile(test, path)
        p = Profile(path)
        ran |= {fn for (ob, fn), cost in p.self_cost.items() if cost and ob.endswith("/rdmabench")}
    # Linker symbols only: not an address (no symbol), not valgrind's "(below main)";
    # callgrind marks recursion depth with 'N.
    symbols = sorted({re.sub(r"'[0-9]+$", "", fn) for fn in ran})
    symbols = [s for s in symbols if not s.startswith(("0x", "(")) and " " not in s]
    with open("src/text-order.txt", "w") as f:
        f.write("# The functions rdmabench's test clients run, laid out first in .text (build.rs).\n"
                "# Written by ci/text-order; one linker symbol a line.\n")
        f.writelines(s + "\n" for s in symbols)


main()
