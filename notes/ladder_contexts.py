"""Does the ladder at context 512 repeat its answer at 1024, so that one context could go?

Reads the committed ten-point ladder grid (``report/reference/h100/ladder-grid-ab1a14a/ladder.csv``,
one H100) and prints each rung's gain over the rung before it on the ladder (the earlier rung's time
over its own), launched and replayed as a CUDA graph, at both contexts, and the ratio of the two.
CPU only.

    python notes/ladder_contexts.py

Ran at: e6a2dad (this CPU), output: logs/2026-11-30-ladder_contexts-e6a2dad-cpu.txt
"""

from pathlib import Path

import pandas as pd

ROWS = Path(__file__).resolve().parents[1] / "report/reference/h100/ladder-grid-ab1a14a/ladder.csv"


def main() -> None:
    rows = pd.read_csv(ROWS)
    rows = rows[rows["on_ladder"]].sort_values(["size", "context_length", "order"])
    for timing, column in (("launched", "median_ms"), ("replayed", "graphed_median_ms")):
        rows["gain"] = rows.groupby(["size", "context_length"])[column].shift(1) / rows[column]
        gains = rows.pivot_table(index=["size", "order", "rung"], columns="context_length", values="gain").dropna()
        gains["1024 / 512"] = gains[1024] / gains[512]
        apart = (gains["1024 / 512"] - 1).abs()
        flips = gains[(gains[512] < 1) != (gains[1024] < 1)]
        print(f"## {timing} ({column})\n")
        print(gains.round(3).to_string())
        print(
            f"\n{len(gains)} gains at both contexts: {int((apart <= 0.01).sum())} within 1% of each other, "
            f"{int((apart > 0.05).sum())} more than 5% apart (the largest {apart.max():.1%}); "
            f"{len(flips)} slow the step at one context and speed it at the other.\n"
        )


if __name__ == "__main__":
    main()
