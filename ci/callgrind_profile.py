"""Reads a callgrind profile (written with --dump-instr=yes --compress-strings=no
--compress-pos=no) and answers what ci/bench_instructions.py asks of it: the whole run's
instructions, a function's inclusive cost, how often its hottest instruction ran, and
which function of the tool's own binary calls into the verbs provider most.

Functions are (object, name); a stripped object's functions are named by address
(perftest's binaries and the rxe provider are stripped), which is as good for counting."""
import collections


class Profile:
    def __init__(self, path):
        self.total = 0
        self.self_cost = collections.Counter()  # (ob, fn) -> Ir
        self.instr = collections.Counter()  # (ob, fn, addr) -> times executed (Ir at addr)
        self.calls = []  # (caller, callee, count, inclusive Ir of those calls)
        ob = fn = None
        call_ob = call_fn = None
        pending = None
        with open(path) as f:
            for line in f:
                if line.startswith("0x"):
                    cols = line.split()
                    cost = int(cols[-1]) if len(cols) >= 3 else 0
                    if pending is not None:
                        self.calls.append(((ob, fn), (call_ob or ob, call_fn), pending, cost))
                        pending = None
                        call_ob = None
                    else:
                        self.instr[(ob, fn, int(cols[0], 16))] += cost
                        self.self_cost[(ob, fn)] += cost
                elif line.startswith("ob="):
                    ob = line[3:].strip()
                elif line.startswith("fn="):
                    fn = line[3:].strip()
                elif line.startswith("cob="):
                    call_ob = line[4:].strip()
                elif line.startswith("cfn="):
                    call_fn = line[4:].strip()
                elif line.startswith("calls="):
                    pending = int(line[6:].split()[0])
                elif line.startswith("summary:"):
                    self.total = int(line.split()[1])

    def functions(self, name_part, ob_part=""):
        """The functions whose name contains `name_part` (and object `ob_part`)."""
        return [k for k in self.self_cost if name_part in k[1] and ob_part in k[0]]

    def inclusive(self, func, minus=()):
        """`func`'s own instructions and those of everything it calls, less the calls to
        functions whose name contains one of `minus`."""
        cost = self.self_cost[func]
        for caller, callee, _, c in self.calls:
            if caller == func and callee != func and not any(m in callee[1] for m in minus):
                cost += c
        return cost

    def hottest(self, func):
        """How many times `func`'s most executed instruction ran: the passes of its
        innermost loop."""
        return max((n for (ob, fn, _), n in self.instr.items() if (ob, fn) == func), default=0)

    def calls_into(self, ob_part, from_ob_part):
        """Per function of an object matching `from_ob_part`: how many calls it makes into
        objects matching `ob_part`."""
        counts = collections.Counter()
        for caller, callee, n, _ in self.calls:
            if from_ob_part in caller[0] and ob_part in callee[0]:
                counts[caller] += n
        return counts
