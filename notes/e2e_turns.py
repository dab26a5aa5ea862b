"""Does e2e's second turn of replays change what a row says, or could each variant's replays be held
and timed once (``lmperf.measure.turns.TURNS`` = 1)?

e2e replays each attention variant in two turns, A B C A B C, each block held first until its step
time is steady, and pools both turns' steps into the row (``graphed_median_ms`` and its CI). Each
row also keeps each turn's median (``graphed_turn_ms``). For the e2e jobs that the full grid's
projection charges as measured through the pipeline (``report/reference/one-allocation/job_costs.csv``,
sources ``head-*``), this prints how far the two turns' medians lie apart, against the pooled CI's
half-width, and what one turn would save: half of each job's holds and captures (its cost split).
CPU only.

    python notes/e2e_turns.py

Ran at: 9960bd3 (this CPU), output: logs/2026-12-01-e2e_turns-9960bd3-cpu.txt
"""

from pathlib import Path

import pandas as pd

from lmperf.measure.stats import split_ms

SLICE = Path(__file__).resolve().parents[1] / "report/reference/one-allocation"


def main() -> None:
    costs = pd.read_csv(SLICE / "job_costs.csv")
    e2e = costs[costs["job"].str.startswith("benchmarks/e2e/") & costs["source"].str.match(r"head-[0-9a-f]+$")]
    rows, saved = [], 0.0
    for job, source in zip(e2e["job"], e2e["source"]):
        name = Path(job).relative_to("benchmarks").with_suffix("")
        frame = pd.read_csv(SLICE / source / "rows" / f"{name}.csv")
        rows.append(frame[frame["graphed_turn_ms"].notna()].assign(job=str(name), source=source))
        split = pd.read_csv(SLICE / source / job.replace(".tsv", ".cost.csv")).set_index("phase")["seconds"]
        saved += (split["settle"] + split["capture"]) / 2
    rows = pd.concat(rows, ignore_index=True)
    turns = rows["graphed_turn_ms"].map(split_ms)
    apart = turns.map(lambda t: abs(t[1] / t[0] - 1))
    half = (rows["graphed_ci95_high_ms"] - rows["graphed_ci95_low_ms"]) / 2 / rows["graphed_median_ms"]
    print(f"{len(rows)} replayed rows of {rows['job'].nunique()} e2e jobs ({', '.join(sorted(set(rows['source'])))})")
    print(f"turns' medians apart: median {apart.median():.2%}, 90th percentile {apart.quantile(0.9):.2%}")
    for share in (0.005, 0.01, 0.02):
        print(f"  more than {share:.1%} apart: {(apart > share).sum()} rows ({(apart > share).mean():.1%})")
    print(f"pooled CI half-width: median {half.median():.2%}; turns apart by more than it: {(apart > half).sum()}")
    by_size = (apart > 0.01).groupby(rows["size"]).agg(["sum", "size"])
    print("more than 1% apart, by size:", ", ".join(f"{size} {n}/{total}" for size, (n, total) in by_size.iterrows()))
    print(f"one turn would save about {saved:.0f} s of these jobs' holds and captures ({saved / 60:.1f} GPU-minutes)")


if __name__ == "__main__":
    main()
