"""Would DDP's train comparisons keep their verdicts with 10 measured steps at least, where the grid
takes 20 (``ddp.steps``), and what would that save?

Each comparison times a variant and torch DDP interleaved, at least ``steps`` pairs, then more until
the paired CI of the ratio excludes 1 or ``max_seconds`` are spent (``lmperf.studies.ddp``). The rows
keep every step of both, in order, so this replays the rule on them with a smaller minimum: the first
number of pairs from 10 at which the CI (500 resamples, as the study's stopping rule) excludes 1,
else all of them; then the ratio and its CI over those pairs (the study's final CI), against the
row's own. The seconds saved are the pairs not timed, at each step's time. It cannot say what more
pairs than a row holds would have shown. CPU only.

    python notes/ddp_min_steps.py

Ran at: cef7cae (this CPU), output: logs/2026-12-01-ddp_min_steps-cef7cae-cpu.txt
"""

from pathlib import Path

import pandas as pd

from lmperf.measure import ratio_ci, resolved
from lmperf.measure.stats import split_ms

ROOT = Path(__file__).resolve().parents[1] / "report/reference"
ROWS = {  # the train jobs at the grid's global batch, with their minimum steps
    "2 ranks (20 steps, 20 s)": ROOT / "one-allocation/head-6e3f832/rows/ddp/train-n2-b16.csv",
    "4 ranks (12 steps, 6 s)": ROOT / "ddp-ranks/rows/ddp/train-n4-b16.csv",
}
MIN_STEPS = 10


def verdict(low: float, high: float) -> str:
    return "not resolved" if not resolved(low, high) else ("faster" if high < 1 else "slower")


def main() -> None:
    for label, path in ROWS.items():
        rows = pd.read_csv(path)
        print(f"{label}: {path.relative_to(ROOT)}")
        head = f"{'variant':>16} {'pairs':>5} {'row: ratio [CI]':>24} {'verdict':>12}"
        print(f"{head} | {'stop':>4} {'ratio [CI]':>24} verdict")
        changed = saved = 0.0
        for _, row in rows[rows["variant"] != "torch_ddp"].iterrows():
            mine, theirs = split_ms(row["step_times_ms"]), split_ms(row["anchor_step_times_ms"])
            stop = next(
                (
                    n
                    for n in range(MIN_STEPS, len(mine) + 1)
                    if resolved(*ratio_ci(mine[:n], theirs[:n], resamples=500)[1:])
                ),
                len(mine),
            )
            ratio, low, high = ratio_ci(mine[:stop], theirs[:stop])
            before = verdict(row["vs_anchor_ci95_low"], row["vs_anchor_ci95_high"])
            after = verdict(low, high)
            changed += before != after
            saved += (sum(mine[stop:]) + sum(theirs[stop:])) / 1e3
            print(
                f"{row['variant']:>16} {len(mine):>5} {row['vs_anchor']:8.3f} [{row['vs_anchor_ci95_low']:.3f}, "
                f"{row['vs_anchor_ci95_high']:.3f}] {before:>12} | "
                f"{stop:>4} {ratio:8.3f} [{low:.3f}, {high:.3f}] {after}"
            )
        print(f"verdicts changed: {changed:.0f} of {len(rows) - 1}; timed seconds saved: {saved:.1f}\n")


if __name__ == "__main__":
    main()
