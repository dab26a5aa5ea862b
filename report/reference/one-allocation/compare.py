"""Do two runs of the same jobs measure the same: alone and side by side, or before and after a cut?

Ran at: 166289c (4 x NVIDIA H200); output: ab4/compare.txt beside this. And at 1661824 for the
cut of cuts/gc (one NVIDIA H200); outputs cuts/gc/flash/compare.txt and cuts/gc/ladder/compare.txt.

    python report/reference/one-allocation/compare.py FIRST_RESULTS SECOND_RESULTS

reads the e2e, ladder (timed) and flash leaderboard and sweep CSVs of two runs of the same targets
(results/ directories), pairs their rows, and says for each graphed median whether it lies inside
the other run's 95% CI or within 1% of it (the sweep's medians come with no CI: within 1% only).
``ratio`` is the second run's median over the first's. Prints one line per row and a last line
with the count that agree.
"""

import sys
from pathlib import Path

import pandas as pd

KEYS = {
    "e2e/*/*.csv": ["size", "precision", "compile", "context_length", "mode", "attention"],
    "ladder/*/*-timed.csv": ["size", "context_length", "rung"],
    "flash/leaderboard.csv": ["implementation", "pass"],
    "flash/sweep/*.csv": ["dtype", "d", "implementation", "pass", "seq"],
}
COLUMNS = ["graphed_median_ms", "graphed_ci95_low_ms", "graphed_ci95_high_ms"]


def rows(results: Path, pattern: str, keys: list[str]) -> pd.DataFrame:
    frames = [pd.read_csv(path) for path in sorted(results.glob(pattern))]
    frame = pd.concat(frames) if frames else pd.DataFrame(columns=keys + COLUMNS + ["status"])
    frame = frame.reindex(columns=frame.columns.union(COLUMNS, sort=False))  # a sweep row has no CI
    return frame[frame["status"] == "ok"].dropna(subset=["graphed_median_ms"])[keys + COLUMNS]


def compare(alone: Path, parallel: Path) -> pd.DataFrame:
    out = []
    for pattern, keys in KEYS.items():
        pairs = rows(alone, pattern, keys).merge(rows(parallel, pattern, keys), on=keys, suffixes=("_a", "_p"))
        if pairs.empty:
            print(f"{pattern}: no pair")
            continue
        a, p = pairs["graphed_median_ms_a"], pairs["graphed_median_ms_p"]
        inside = ((a >= pairs["graphed_ci95_low_ms_p"]) & (a <= pairs["graphed_ci95_high_ms_p"])) | (
            (p >= pairs["graphed_ci95_low_ms_a"]) & (p <= pairs["graphed_ci95_high_ms_a"])
        )
        pairs = pairs.assign(
            study=pattern.split("/")[0],
            point=pairs[keys].astype(str).agg(" ".join, axis=1),
            ratio=p / a,
            agree=inside | ((p / a - 1).abs() <= 0.01),
        )
        out.append(pairs[["study", "point", "graphed_median_ms_a", "graphed_median_ms_p", "ratio", "agree"]])
    return pd.concat(out, ignore_index=True)


def main():
    table = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    print(f"{int(table['agree'].sum())} of {len(table)} graphed medians agree (inside the other's CI or within 1%)")


if __name__ == "__main__":
    main()
