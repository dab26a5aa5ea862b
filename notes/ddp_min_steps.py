"""Would DDP's train comparisons keep their verdicts with 10 measured steps at least, where the grid
takes 20 (``ddp.steps``), and what would that save?

Each comparison times a variant and torch DDP interleaved, pair by pair (``lmperf.studies.ddp``,
``lmperf.measure.timing.measure``): at least ``min_steps`` pairs; after each pair from there, it
stops once ``max_seconds`` of timing have passed, or, at the pairs where ``measure`` checks (n with
(n - min_steps) % max(1, n // 8) == 0), once the paired CI of the ratio (500 resamples) excludes 1
on every rank. The rows keep every step of both, in order, but only the slowest rank's time of each,
so this replays the rule on those, with the time passed taken as the steps' own sum (no gaps): first
at the row's own minimum and time limit, to show where the replay reproduces the pairs the row holds,
then from 10 pairs with the full grid's time limit (``config.yaml``). For each stop, the ratio and
its CI over the pairs up to it (the study's final CI, against the row's own) and the seconds of the
pairs not timed. It cannot say what more pairs than a row holds would have shown. CPU only.

    python notes/ddp_min_steps.py

Ran at: a2e44f9 (this CPU), output: logs/2026-12-01-ddp_min_steps-a2e44f9-cpu.txt
"""

from pathlib import Path

import pandas as pd
import yaml

from lmperf.measure import ratio_ci, resolved
from lmperf.measure.stats import split_ms

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "report/reference"
GRID_SECONDS = float(yaml.safe_load((REPO / "config.yaml").read_text())["grids"]["full"]["ddp"]["max_seconds"])
ROWS = {  # the train jobs at the grid's global batch, with their minimum steps and seconds a comparison
    "2 ranks (20 steps, 20 s)": ROOT / "one-allocation/head-6e3f832/rows/ddp/train-n2-b16.csv",
    "4 ranks (12 steps, 6 s)": ROOT / "ddp-ranks/rows/ddp/train-n4-b16.csv",
}
MIN_STEPS = 10


def stop(mine: list[float], theirs: list[float], min_steps: int, max_seconds: float) -> int:
    """The pairs after which the study's rule stops, replayed on the recorded steps (ms); all of them
    where it would not have stopped within them."""
    for n in range(min_steps, len(mine) + 1):
        if (sum(mine[:n]) + sum(theirs[:n])) / 1e3 > max_seconds:
            return n
        if (n - min_steps) % max(1, n // 8) == 0 and resolved(*ratio_ci(mine[:n], theirs[:n], resamples=500)[1:]):
            return n
    return len(mine)


def verdict(low: float, high: float) -> str:
    return "not resolved" if not resolved(low, high) else ("faster" if high < 1 else "slower")


def main() -> None:
    for label, path in ROWS.items():
        rows = pd.read_csv(path)
        print(f"{label}: {path.relative_to(ROOT)}")
        head = f"{'variant':>16} {'pairs':>5} {'own':>4} {'row: ratio [CI]':>24} {'verdict':>12}"
        print(f"{head} | {'stop':>4} {'ratio [CI]':>24} verdict")
        changed = saved = reproduced = 0
        for _, row in rows[rows["variant"] != "torch_ddp"].iterrows():
            mine, theirs = split_ms(row["step_times_ms"]), split_ms(row["anchor_step_times_ms"])
            own = stop(mine, theirs, int(row["min_steps"]), float(row["max_seconds"]))
            at = stop(mine, theirs, MIN_STEPS, GRID_SECONDS)
            ratio, low, high = ratio_ci(mine[:at], theirs[:at])
            before, after = verdict(row["vs_anchor_ci95_low"], row["vs_anchor_ci95_high"]), verdict(low, high)
            reproduced += own == len(mine)
            changed += before != after
            saved += (sum(mine[at:]) + sum(theirs[at:])) / 1e3
            print(
                f"{row['variant']:>16} {len(mine):>5} {own:>4} {row['vs_anchor']:8.3f} "
                f"[{row['vs_anchor_ci95_low']:.3f}, {row['vs_anchor_ci95_high']:.3f}] {before:>12} | "
                f"{at:>4} {ratio:8.3f} [{low:.3f}, {high:.3f}] {after}"
            )
        print(
            f"replayed at the row's own minimum and limit, the pairs it holds: {reproduced} of {len(rows) - 1}; from "
            f"{MIN_STEPS} pairs at {GRID_SECONDS:g} s, verdicts changed: {changed} of {len(rows) - 1}; timed seconds "
            f"saved: {saved:.1f}\n"
        )


if __name__ == "__main__":
    main()
