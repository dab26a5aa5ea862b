"""FlashAttention figure: achieved TFLOP/s of forward+backward vs sequence length, per implementation."""

import pandas as pd

from lmperf.log import to_stderr
from lmperf.report.markdown import ok
from lmperf.report.style import figure, figure_cli, not_drawn, save


def tflops_vs_seq(sweep: pd.DataFrame, path) -> None:
    rows = ok(sweep) if "status" in sweep else sweep.iloc[:0]
    rows = rows[rows["pass"] == "forward_backward"] if len(rows) else rows
    # a skipped-only frame has no dtype, d or implementation columns
    dtypes, head_dims, names = (
        (sorted(set(rows["dtype"])), sorted({int(d) for d in rows["d"]}), sorted(set(rows["implementation"])))
        if len(rows)
        else ([], [], [])
    )
    if not dtypes:
        reason = sweep["note"].iloc[0] if len(sweep) and "note" in sweep else "no rows"
        return not_drawn(path, "FlashAttention: TFLOP/s of forward + backward", f"no measurements: {reason}")
    fig, axes = figure(ncols=max(1, len(head_dims)), nrows=max(1, len(dtypes)))  # a row per dtype, a column per d
    colors = {name: f"C{i}" for i, name in enumerate(names)}  # one colour per implementation in every panel
    for (row, dtype), (col, d) in ((r, c) for r in enumerate(dtypes) for c in enumerate(head_dims)):
        ax = axes[row][col]
        panel = rows[(rows["dtype"] == dtype) & (rows["d"] == d)]
        if panel.empty:
            ax.set_axis_off()
            continue
        for name, group in panel.groupby("implementation"):
            group = group.sort_values("seq")
            ax.plot(group["seq"], group["tflops"], marker="o", label=name, color=colors[name])
        ax.set(xlabel="sequence length", ylabel="TFLOP/s (forward + backward)", title=f"causal, {dtype}, d={d}")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
    save(fig, path)


if __name__ == "__main__":
    to_stderr()
    figure_cli(tflops_vs_seq, "sweep", __doc__)
