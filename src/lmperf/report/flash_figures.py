"""FlashAttention figure: achieved TFLOP/s of forward+backward vs sequence length, per implementation."""

import pandas as pd

from lmperf.report.markdown import ok
from lmperf.report.style import figure, figure_cli, save


def tflops_vs_seq(sweep: pd.DataFrame, path) -> None:
    rows = ok(sweep) if "status" in sweep else sweep.iloc[:0]
    rows = rows[rows["pass"] == "forward_backward"] if len(rows) else rows
    panels = sorted({(r.dtype, int(r.d)) for r in rows.itertuples()}) if len(rows) else []
    fig, axes = figure(ncols=max(1, len(panels)))
    if not panels:
        reason = sweep["note"].iloc[0] if len(sweep) and "note" in sweep else "no rows"
        axes[0][0].text(0.5, 0.5, f"no measurements: {reason}", ha="center", va="center", wrap=True)
        axes[0][0].set_axis_off()
    for ax, (dtype, d) in zip(axes[0], panels):
        panel = rows[(rows["dtype"] == dtype) & (rows["d"] == d)]
        for name, group in panel.groupby("implementation"):
            group = group.sort_values("seq")
            ax.plot(group["seq"], group["tflops"], marker="o", label=name)
        ax.set(xscale="log", xlabel="sequence length", ylabel="TFLOP/s (forward + backward)", title=f"causal, {dtype}, d={d}")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
    save(fig, path)


if __name__ == "__main__":
    figure_cli(tflops_vs_seq, "sweep", __doc__)
