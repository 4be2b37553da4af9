"""Runs inside the lab (ci/bench-verbs): the criterion benchmark of the safe verbs layer
against raw rdma-sys (timing), then the same round trips counted by callgrind: user-space
instructions of work per round trip, safe against raw, sge and inline, for three pairs
(one-shot posts; prepared ones, checked at each post, against a raw request built once;
and prepared ones bound to their QP and region, checked once, against the same raw side).

The bench's `--instructions N MODE` runs N round trips of each variant in a function of
its own and says how many of their polls found nothing; it then polls an empty CQ N
times each way, which prices one such pass. Work per round trip = (the round trips'
inclusive instructions - empty polls x the price of one) / N."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench_common import Verdicts  # noqa: E402
from callgrind_profile import Profile  # noqa: E402

N = int(os.environ.get("BENCH_ITERS", "2000"))


def inclusive_per(p, name, n):
    found = [f for f in p.self_cost if f"::{name}" in f[1]]
    if len(found) != 1:
        sys.exit(f"bench-verbs: expected one {name} in the profile, found {found}")
    return p.inclusive(found[0]) / n


def main():
    exe, args = sys.argv[1], sys.argv[2:]
    rc = subprocess.call([exe, "--bench"] + args)
    if rc != 0:
        sys.exit(rc)
    os.makedirs("target/bench", exist_ok=True)
    verdicts = Verdicts("verbs")
    for mode in ("sge", "inline"):
        path = f"target/bench/verbs-{mode}.cg"
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--compress-strings=no", "--compress-pos=no",
             f"--callgrind-out-file={path}", exe, "--instructions", str(N), mode],
            capture_output=True, text=True)
        pairs = re.findall(r"empty polls: (safe\w*) (\d+) (raw\w*) (\d+)", run.stdout)
        if run.returncode != 0 or len(pairs) != 3:
            sys.exit(f"bench-verbs: the instruction run failed:\n{run.stdout}{run.stderr}")
        p = Profile(path)
        for safe, empty_safe, raw, empty_raw in pairs:
            work = {}
            for side, empty in ((safe, int(empty_safe)), (raw, int(empty_raw))):
                per_empty = inclusive_per(p, f"{side.split('_')[0]}_empty_polls", N)
                rounds = inclusive_per(p, f"{side}_rounds", N)
                work[side] = rounds - empty / N * per_empty
                print(f"instructions ({mode}) {side}: {rounds:.1f} per round trip, {empty / N:.3f} empty polls "
                      f"per round trip at {per_empty:.1f} each, work {work[side]:.1f}")
            cost = (work[safe] / work[raw] - 1) * 100
            pair = safe.partition("_")[2] or "one-shot"
            # The target is judged on the prepared pair: the posts the engine's loops make
            # (checked against their QP and region each time). The bound pair (the layer's
            # leanest post) and the one-shot one (which checks and encodes its request) are
            # shown beside it, not judged.
            word = ""
            if pair == "prepared":
                figure = f"safe verbs layer, prepared posts ({mode}): instructions over raw rdma-sys"
                word = " target <= +2 % " + verdicts.judge(figure, f"{cost:+.2f} %", "<= +2 %", cost <= 2.0)
            print(f"wrapper cost in instructions ({mode}, {pair}): {cost:+.2f} % (work per round trip: safe "
                  f"{work[safe]:.1f}, raw {work[raw]:.1f}; {N} round trips each under callgrind){word}")
    verdicts.finish(f"{N} round trips of each pair under callgrind; work = the round trips' instructions less "
                    "their empty polls at the measured price of one")


main()
