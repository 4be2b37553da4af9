"""Runs on node 1 of `ci/lab-vm --nodes 2` (ci/bench-mesh): `rdmabench mesh` over two
ranks, one per node, against standalone write-bw/write-lat between the same endpoints,
interleaved; prints medians and mesh/standalone ratios."""
import json
import os
import shlex
import statistics
import subprocess
import tempfile

from bench_common import client_against, table_row

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
RDMABENCH = os.path.abspath(os.environ.get("RDMABENCH", "target/release/rdmabench"))
CONFIG = os.environ["RDMABENCH_LAB_SSH_CONFIG"]
SSH = ["ssh", "-F", CONFIG, "node2"]
PEER = "198.18.1.2"
BW = ("65536", "100")   # size, iterations: seconds per test at the lab's 5-25 MB/s
LAT = ("2", "200")


def mesh():
    """One mesh of two ranks: {(from, to): (bw MiB/s, t_typical usec)}."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        # The mesh takes one -s and -n for both tests: two meshes, one per test's sizes.
        out = {}
        for (size, iters), key in ((BW, "bw"), (LAT, "lat")):
            cmd = ["mpirun", "--allow-run-as-root", "--host", "node1,node2", "-np", "2",
                   "--mca", "plm_rsh_agent", f"ssh -F {CONFIG}",
                   "--mca", "oob_tcp_if_include", "198.18.1.0/24", "--mca", "btl_tcp_if_include", "198.18.1.0/24",
                   RDMABENCH, "mesh", "-s", size, "-n", iters, "--outlier", "1000", "--json", f.name]
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=600, check=True)
            doc = json.load(open(f.name))
            for link in doc["links"]:
                value = link["bw_mb_per_sec"] if key == "bw" else link["t_typical_usec"]
                out[(key, link["from"], link["to"])] = value
        return out


def standalone(test, size, iters, reverse):
    """write-bw or write-lat with the client on node 1 (or node 2 with `reverse`)."""
    cmd = [RDMABENCH, test, "-p", "18540", "-d", "rxe0", "-s", size, "-n", iters]
    if not reverse:
        server = subprocess.Popen(SSH + [shlex.join(["timeout", "300"] + cmd)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = client_against(server, cmd + [PEER])
    else:
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = client_against(server, SSH + [shlex.join(["timeout", "300"] + cmd + ["198.18.1.1"])])
    cols = table_row(out, int(size))
    return cols[1] if test == "write-bw" else cols[2]


def main():
    results = {}
    cases = [("bw", 0, 1), ("bw", 1, 0), ("lat", 0, 1), ("lat", 1, 0)]
    for rnd in range(1, ROUNDS + 1):
        order = ["mesh", "standalone"] if rnd % 2 else ["standalone", "mesh"]
        for tool in order:
            if tool == "mesh":
                for key, value in mesh().items():
                    results.setdefault((key, "mesh"), []).append(value)
            else:
                for key in cases:
                    test, size, iters = ("write-bw", *BW) if key[0] == "bw" else ("write-lat", *LAT)
                    results.setdefault((key, "standalone"), []).append(standalone(test, size, iters, key[1] == 1))
        print(f"round {rnd} done", flush=True)
    print()
    print(f"{'link':<16} {'standalone':>11} {'mesh':>9} {'ratio':>7}")
    for key in cases:
        ref = statistics.median(results[(key, "standalone")])
        ours = statistics.median(results[(key, "mesh")])
        name = f"{'write_bw 64K' if key[0] == 'bw' else 'write_lat 2'} {key[1]}->{key[2]}"
        unit = "MiB/s" if key[0] == "bw" else "usec"
        print(f"{name:<16} {ref:>9.2f} {ours:>9.2f} {unit:<5} {ours / ref:>6.3f}")
    print(f"\n{ROUNDS} rounds, medians; node1 = rank 0, node2 = rank 1; -n {BW[1]} (bw), {LAT[1]} (lat)")


main()
