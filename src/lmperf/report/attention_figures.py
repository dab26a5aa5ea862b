"""Naive attention figure: forward and backward time, and memory held for backward, vs sequence length."""

import numpy as np
import pandas as pd

from lmperf.report.markdown import ok
from lmperf.report.style import context_colors, figure, figure_cli, save

COMPILE_STYLE = {"eager": "-", "compiled": "--"}


def held_mib(rows: pd.DataFrame) -> pd.Series:
    """Memory held for backward: the allocator's count on a GPU, the autograd-saved bytes elsewhere."""
    measured = rows["held_for_backward_mib"] if "held_for_backward_mib" in rows else pd.Series(np.nan, index=rows.index)
    observed = rows["observed_saved_mib"] if "observed_saved_mib" in rows else pd.Series(np.nan, index=rows.index)
    return measured.fillna(observed)


def sweep_figure(attention: pd.DataFrame, path) -> None:
    rows = ok(attention).assign(held=lambda f: held_mib(f))
    colors = context_colors(rows["d"]) if len(rows) else {}
    fig, axes = figure(ncols=3)
    panels = [
        ("forward_mean_ms", "forward (ms)"),
        ("backward_mean_ms", "backward (ms)"),
        ("held", "held for backward (MiB)"),
    ]
    for ax, (column, label) in zip(axes[0], panels):
        for (compile_, d), group in rows.groupby(["compile", "d"]):
            group = group.sort_values("seq").dropna(subset=[column])
            ax.plot(
                group["seq"],
                group[column],
                COMPILE_STYLE[compile_],
                marker="o",
                color=colors[d],
                label=f"d={d}, {compile_}",
            )
        ax.set(xscale="log", yscale="log", xlabel="sequence length", ylabel=label)
    if len(rows):
        axes[0][0].legend(fontsize=6)
    save(fig, path)


if __name__ == "__main__":
    figure_cli(sweep_figure, "attention", __doc__)
