"""Where a flash sweep target's warm-up goes: the seconds of each implementation's trial passes (its
first calls at each length and pass: compile, autotune and at least eight calls), summed from the
`trial ...` lines its log has carried since 5cda776; and the three longest trials.

    python trials.py head-5cda776/logs/flash/sweep/*.log    (in this folder)
"""

import re
import sys
from collections import Counter
from pathlib import Path

TRIAL = re.compile(r"trial\s+(\S+)\s+(\S+) seq\s+(\d+):\s+([\d.]+) s, ([\d.]+) ms a call")

for log in sys.argv[1:]:
    trials = [m.groups() for m in map(TRIAL.search, Path(log).read_text().splitlines()) if m]
    by_impl = Counter()
    for name, _, _, seconds, _ in trials:
        by_impl[name] += float(seconds)
    longest = sorted(trials, key=lambda t: -float(t[3]))[:3]
    print(
        f"{Path(log).stem}: {sum(by_impl.values()):.1f} s in {len(trials)} trials; "
        + ", ".join(f"{name} {s:.1f}" for name, s in by_impl.most_common())
    )
    print("  longest: " + "; ".join(f"{n} {p} seq {q}: {s} s ({ms} ms a call)" for n, p, q, s, ms in longest))
