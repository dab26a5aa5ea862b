"""The ladder's waterfall: per (size, context), the first rung's step time, then each rung's saving.

python -m lmperf.report.ladder_figures --ladder results/ladder.csv --out report/figures/ladder_waterfall.png
"""

import pandas as pd

from lmperf.log import to_stderr
from lmperf.report.style import figure, figure_cli, save, sort_by_size

SAVING, LOSS = "tab:green", "tab:red"


def draw(ladder: pd.DataFrame, out: str) -> None:
    ladder = sort_by_size(ladder, ["size", "context_length", "order"])
    points = list(ladder.groupby(["size", "context_length"], sort=False))
    fig, axes = figure(ncols=1, nrows=max(1, len(points)), width=7.5, height=2.8)
    for ax, ((size, ctx), point) in zip(axes[:, 0], points):
        ran = point[(point["status"] == "ok") & point["on_ladder"].astype(bool)]
        previous = None
        for x, (_, row) in enumerate(ran.iterrows()):
            if previous is None:
                ax.bar(x, row["median_ms"], color="tab:gray")
            else:
                low, high = sorted((previous, row["median_ms"]))
                ax.bar(x, high - low, bottom=low, color=SAVING if row["median_ms"] < previous else LOSS)
            ax.errorbar(
                x,
                row["median_ms"],
                [[row["median_ms"] - row["ci95_low_ms"]], [row["ci95_high_ms"] - row["median_ms"]]],
                color="black",
                capsize=2,
            )
            previous = row["median_ms"]
        ax.set_xticks(range(len(ran)), ran["rung"], rotation=20, fontsize=7)
        anchor = point[(point["rung"] == "torch_stack") & (point["status"] == "ok")]
        if not anchor.empty:
            ax.axhline(anchor["median_ms"].iloc[0], linestyle="--", color="tab:blue", label="torch stack")
            ax.legend(fontsize=7)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("train step (ms)")
        ax.set_title(f"{size}, context {ctx}", fontsize=9)
    save(fig, out)


def main() -> None:
    figure_cli(draw, "ladder", __doc__)


if __name__ == "__main__":
    to_stderr()
    main()
