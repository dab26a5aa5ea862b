"""The ladder job's holds and first-turn medians, from its two logs (the job was stopped by the
time limit before it wrote rows): `python holds.py before/ctx1024-timed.log after/ctx1024-timed.log`.

A hold is the time from a block's `phase settle` to the next phase the log names; the medians are
the `launched` / `replayed` lines, in the order the rungs ran."""

import datetime
import statistics
import sys


def read(path):
    lines = open(path).read().splitlines()
    when = lambda line: datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")  # noqa: E731
    phases = [(when(line), line.split("phase ")[1]) for line in lines if "phases: phase" in line]
    holds = [(b[0] - a[0]).total_seconds() for a, b in zip(phases, phases[1:]) if a[1] == "settle"]
    medians = [tuple(line.split()[-4:-1]) for line in lines if line.endswith(" ms") and ("launched" in line or "replayed" in line)]
    return holds, medians


(before_holds, before), (after_holds, after) = read(sys.argv[1]), read(sys.argv[2])
for name, holds in (("before", before_holds), ("after", after_holds)):
    print(f"{name}: {len(holds)} holds, {min(holds):.2f}-{max(holds):.2f} s, median {statistics.median(holds):.2f} s")
print("rung, timing, before ms, after ms, after / before")
for (rung, kind, a), (rung2, kind2, b) in zip(before, after):
    assert (rung, kind) == (rung2, kind2)
    print(f"{rung}, {kind}, {a}, {b}, {float(b) / float(a):.4f}")
