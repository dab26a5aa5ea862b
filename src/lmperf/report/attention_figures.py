"""Naive attention figure: forward and backward time, and memory held for backward, vs sequence length."""

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lmperf.log import to_stderr
from lmperf.report.markdown import ok
from lmperf.report.style import context_colors, figure, figure_cli, save

# eager and compiled differ in line, marker and fill, so that either tells them apart; colour is the head size
COMPILE_STYLE = {
    "eager": {"linestyle": "-", "marker": "o", "markerfacecolor": None},
    "compiled": {"linestyle": "--", "marker": "s", "markerfacecolor": "none"},
}


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
            ax.plot(group["seq"], group[column], color=colors[d], **COMPILE_STYLE[compile_])
        ax.set(xscale="log", yscale="log", xlabel="sequence length", ylabel=label)
    if len(rows):
        compiles = [c for c in COMPILE_STYLE if c in set(rows["compile"])]
        axes[0][0].legend(handles=legend_handles(colors, compiles), fontsize=7)
    save(fig, path)


def legend_handles(colors: dict, compiles: list[str]) -> list[Line2D]:
    """One entry per head size (its colour) and one per compile mode (its line and marker, in grey)."""
    handles = [Line2D([], [], color=c, linewidth=3, label=f"d = {d}") for d, c in colors.items()]
    return handles + [Line2D([], [], color="gray", label=mode, **COMPILE_STYLE[mode]) for mode in compiles]


if __name__ == "__main__":
    to_stderr()
    figure_cli(sweep_figure, "attention", __doc__)
