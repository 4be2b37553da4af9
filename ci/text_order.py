"""Runs inside the lab (ci/text-order): `text_order.py BUILD BINARY` runs each perftest-style
test's client of BINARY under callgrind against a plain server, and writes every function
of BINARY that executed, by symbol, into BUILD's section of src/text-order.txt (build.rs
hands the file to the linker). The plain release build and the mesh build (the .deb's)
have a section each: a crate built with other features has other symbol hashes."""
import os
import re
import subprocess
import tempfile
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import await_listening, client_against, listening  # noqa: E402
from callgrind_profile import Profile  # noqa: E402

LIST = "src/text-order.txt"
HEADER = ("# The functions rdmabench's test clients run, laid out first in .text (build.rs).\n"
          "# Written by ci/text-order; one linker symbol a line, a section per build.\n")
SECTION = "# build: "
DEV = os.environ.get("RDMABENCH_DEVICE", "rxe0")
PORT = 18520
OUT = "target/text-order"
TESTS = ["write-lat", "read-lat", "send-lat", "atomic-lat",
         "write-bw", "write-bw -a -n 200", "read-bw", "send-bw", "atomic-bw",
         "write-bw --run_infinitely -D 2"]
# A run without an end is stopped as its user stops it, with SIGINT, after this many
# seconds (its interval reports have run by then: ci/bench-memory's long run keeps them).
UNENDING = {"write-bw --run_infinitely -D 2": 90}
CALLGRIND = ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=yes",
             "--compress-strings=no", "--compress-pos=no"]


def profile(binary, test, path):
    cmd = [binary] + test.split() + ["-d", DEV, "-x", "1", "-p", str(PORT)]
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    await_listening(server, PORT, 60)
    if not listening(PORT):
        server.kill()
        log.seek(0)
        sys.exit(f"text-order: the {test} server never listened (exit {server.wait()}):\n{log.read().decode(errors='replace')}")
    stop = ["timeout", "--preserve-status", "-s", "INT", str(UNENDING[test])] if test in UNENDING else []
    client_against(server, stop + CALLGRIND + [f"--callgrind-out-file={path}"] + cmd + ["127.0.0.1"])


def functions_run(binary, build):
    for i, test in enumerate(TESTS):
        profile(binary, test, f"{OUT}/{build}-{i}.cg")
    return functions_in(binary, build)


def functions_in(binary, build):
    """The functions of `binary` that ran in `build`'s profiles (one per test, in OUT)."""
    ran = set()
    for i in range(len(TESTS)):
        p = Profile(f"{OUT}/{build}-{i}.cg")
        ran |= {fn for (ob, fn), cost in p.self_cost.items() if cost and ob == os.path.abspath(binary)}
    # Linker symbols only: not an address (no symbol), not valgrind's "(below main)";
    # callgrind marks recursion depth with 'N.
    names = {re.sub(r"'[0-9]+$", "", fn) for fn in ran}
    return sorted(n for n in names if not n.startswith(("0x", "(")) and " " not in n)


def sections():
    """The list's sections, build -> symbols, in file order."""
    found, build = {}, None
    if os.path.exists(LIST):
        for line in open(LIST).read().splitlines():
            if line.startswith(SECTION):
                build = line[len(SECTION):]
                found[build] = []
            elif line and not line.startswith("#") and build:
                found[build].append(line)
    return found


def main():
    build, binary = sys.argv[1], sys.argv[2]
    found = sections()
    found[build] = functions_run(binary, build)
    with open(LIST, "w") as f:
        f.write(HEADER)
        for name, symbols in found.items():
            f.write(f"{SECTION}{name}\n")
            f.writelines(s + "\n" for s in symbols)


if __name__ == "__main__":  # ci/bench_instructions.py imports `sections`
    main()
