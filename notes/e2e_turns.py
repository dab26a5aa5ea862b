"""Does e2e's second turn of replays change what a row says, or could each variant's replays be held
and timed once (``lmperf.measure.turns.TURNS`` = 1)?

e2e replays each attention variant in two turns, A B C A B C, each block held first until its step
time is steady, and pools both turns' steps into the row (``graphed_median_ms`` and its CI). The rows
keep the pooled steps in turn order (``graphed_step_times_ms``) and each turn's median
(``graphed_turn_ms``), from which each turn's steps are found again. For the e2e jobs that the full
grid's projection charges (``jobs.csv`` and ``job_costs.csv`` of ``report/reference/one-allocation/``),
each measured through the pipeline, this prints:

- how far the two turns' medians lie apart, against the pooled CI's half-width, and against chance:
  each row's steps shuffled between its turns (1000 times), the share of shuffles as far apart;
- what a row says with the first turn alone: for each pair of attentions at one point, faster,
  slower or not resolved (their 95% CIs overlap), from the first turn's steps against from both;
- what one turn would save: half of each job's holds and captures (its cost split), and the
  projection on four GPUs with each job charged that much less.

CPU only.

    python notes/e2e_turns.py

Ran at: a2e44f9 (this CPU), output: logs/2026-12-01-e2e_turns-a2e44f9-cpu.txt
"""

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from lmperf.measure.stats import split_ms, summarize_ms
from lmperf.report.projection import project, summary

SLICE = Path(__file__).resolve().parents[1] / "report/reference/one-allocation"
FOLDERS = {"cuts/probe": "cuts/probe/with"}  # a source in job_costs.csv whose folder is not its name
SHUFFLES = 1000


def first_turn(steps: list[float], turns: list[float]) -> int:
    """How many of the pooled steps the first turn timed: the split whose two medians are the turns'."""
    return next(
        k
        for k in range(1, len(steps))
        if np.isclose(np.median(steps[:k]), turns[0], rtol=1e-4)
        and np.isclose(np.median(steps[k:]), turns[1], rtol=1e-4)
    )


def chance(steps: list[float], k: int, apart: float, rng: np.random.Generator) -> float:
    """The share of shuffles of ``steps`` between two turns of k and the rest that lie at least ``apart``."""
    x = np.array(steps)
    far = 0
    for _ in range(SHUFFLES):
        rng.shuffle(x)
        far += abs(np.median(x[k:]) / np.median(x[:k]) - 1) >= apart
    return far / SHUFFLES


def verdict(a: tuple[float, float], b: tuple[float, float]) -> str:
    """a against b from their CIs (low, high): faster, slower, or not resolved where they overlap."""
    return "faster" if a[1] < b[0] else "slower" if a[0] > b[1] else "not resolved"


def main() -> None:
    costs = pd.read_csv(SLICE / "job_costs.csv")
    grid = pd.read_csv(SLICE / "jobs.csv")["job"]  # the full grid's jobs (job_costs.csv has wide.yaml's too)
    e2e = costs[costs["job"].str.startswith("benchmarks/e2e/") & costs["job"].isin(grid)]
    frames, saved, left_out = [], {}, []
    for job, source in zip(e2e["job"], e2e["source"]):
        folder = SLICE / FOLDERS.get(source, source)
        name = Path(job).relative_to("benchmarks").with_suffix("")
        if not (folder / "rows" / f"{name}.csv").exists():
            left_out.append(f"{name} ({source})")
            continue
        frame = pd.read_csv(folder / "rows" / f"{name}.csv")
        frames.append(frame[frame["graphed_turn_ms"].notna()].assign(job=str(name)))
        split = pd.read_csv(folder / job.replace(".tsv", ".cost.csv")).set_index("phase")["seconds"]
        saved[job] = (split["settle"] + split["capture"]) / 2
    rows = pd.concat(frames, ignore_index=True)
    steps, turns = rows["graphed_step_times_ms"].map(split_ms), rows["graphed_turn_ms"].map(split_ms)
    rows["k"] = [first_turn(s, t) for s, t in zip(steps, turns)]
    rows["apart"] = turns.map(lambda t: abs(t[1] / t[0] - 1))
    half = (rows["graphed_ci95_high_ms"] - rows["graphed_ci95_low_ms"]) / 2 / rows["graphed_median_ms"]
    rng = np.random.default_rng(0)
    rows["p"] = [chance(s, k, a, rng) for s, k, a in zip(steps, rows["k"], rows["apart"])]
    print(
        f"{len(rows)} replayed rows of {rows['job'].nunique()} e2e jobs; left out (no rows here): {left_out or 'none'}"
    )
    print(
        f"turns' medians apart: median {rows['apart'].median():.2%}, 90th percentile {rows['apart'].quantile(0.9):.2%}"
    )
    for share in (0.005, 0.01, 0.02):
        over = rows["apart"] > share
        print(f"  more than {share:.1%} apart: {over.sum()} rows ({over.mean():.1%})")
    print(
        f"pooled CI half-width: median {half.median():.2%}; turns apart by more than it: {(rows['apart'] > half).sum()}"
    )
    expected = 0.05 * len(rows)
    print(
        f"rows whose turns lie further apart than 95% of shuffles: {(rows['p'] < 0.05).sum()} (chance: {expected:.0f})"
    )
    by_size = (rows["apart"] > 0.01).groupby(rows["size"]).agg(["sum", "size"])
    print("more than 1% apart, by size:", ", ".join(f"{s} {n}/{total}" for s, (n, total) in by_size.iterrows()))

    rows["pooled"] = list(zip(rows["graphed_ci95_low_ms"], rows["graphed_ci95_high_ms"]))
    first = [summarize_ms([t / 1e3 for t in s[:k]]) for s, k in zip(steps, rows["k"])]
    rows["first"] = [(f["ci95_low_ms"], f["ci95_high_ms"]) for f in first]
    changed = total = 0
    for _, point in rows.groupby(["job", "context_length", "mode"]):
        for (_, a), (_, b) in combinations(point.iterrows(), 2):
            total += 1
            changed += verdict(a["pooled"], b["pooled"]) != verdict(a["first"], b["first"])
    print(f"attention pairs at one point: {total}; verdict from the first turn alone differs at {changed}")
    total = sum(saved.values())
    print(f"one turn would save about {total:.0f} s of these jobs' holds and captures ({total / 60:.1f} GPU-minutes)")
    less = costs.assign(wall_s=costs["wall_s"] - costs["job"].map(saved).fillna(0.0))
    for label, charged in (("as charged", costs), ("with one turn", less)):
        projected = summary(project(pd.read_csv(SLICE / "jobs.csv"), charged), 4).set_index("study").loc["all"]
        print(f"projection {label}: {projected['gpu_min']:.1f} GPU-minutes, {projected['wall_min']:.1f} min on 4 GPUs")


if __name__ == "__main__":
    main()
