"""Figures of the end-to-end study: launched vs graphed time, graphed step time vs size, the
backward/forward ratio and the bf16 speed-up (both graphed), warm-up across processes.

Conventions shared by all: colour = context length, line style = precision (solid fp32, dashed
bf16), x = model size on a log axis of parameter counts.
"""

import argparse
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from lmperf import grid
from lmperf.log import to_stderr
from lmperf.report.e2e_analysis import GPU_MS, LAUNCHED_MS, backward_ratio, handout_model, speedup, step_times
from lmperf.report.markdown import ok
from lmperf.report.style import MODE_LABELS, PRECISION_STYLE, context_colors, figure, not_drawn, save, size_axis


def _legend(ax, colors, precisions=grid.PRECISIONS) -> None:
    handles = [Line2D([], [], color=c, marker="o", label=f"ctx {ctx}") for ctx, c in colors.items()]
    handles += [Line2D([], [], color="gray", ls=PRECISION_STYLE[p], label=p) for p in precisions]
    ax.legend(handles=handles, fontsize=7)


def no_graphed_times(path: Path, title: str) -> None:
    """The figure's place where no step was graphed (a CPU run): a panel that names the figure and says why."""
    not_drawn(path, title, "no step was replayed as a CUDA graph in this run\n(CUDA graphs need a CUDA device)")


def time_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    """Graphed time. Rows: eager, compiled. Columns: forward, forward+backward, train step."""
    times = step_times(e2e, GPU_MS)
    if times.empty:
        return no_graphed_times(path, "Graphed step time vs model size")
    modes = [m for m in MODE_LABELS if m in times.columns]
    compiles = [c for c in grid.COMPILE_MODES if c in set(times["compile"])]
    colors = context_colors(times["context_length"])
    fig, axes = figure(ncols=len(modes), nrows=len(compiles))
    for row, compile_ in enumerate(compiles):
        for col, mode in enumerate(modes):
            ax = axes[row][col]
            subset = times[times["compile"] == compile_]
            for (precision, ctx), group in subset.groupby(["precision", "context_length"]):
                group = group.sort_values("params")
                ax.plot(group["params"] / 1e6, group[mode], PRECISION_STYLE[precision], marker="o", color=colors[ctx])
            size_axis(ax, times)
            ax.set(yscale="log", ylabel="graphed step time (ms)", title=f"{MODE_LABELS[mode]}, {compile_}")
    _legend(axes[0][0], colors)
    save(fig, path)


def ratio_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    ratios = backward_ratio(e2e)
    if ratios.empty:
        return no_graphed_times(path, "Forward + backward over forward")
    compiles = [c for c in grid.COMPILE_MODES if c in set(ratios["compile"])]
    colors = context_colors(ratios["context_length"])
    fig, axes = figure(ncols=max(1, len(compiles)))
    for ax, compile_ in zip(axes[0], compiles):
        for (precision, ctx), group in ratios[ratios["compile"] == compile_].groupby(["precision", "context_length"]):
            group = group.sort_values("params")
            ax.plot(group["params"] / 1e6, group["ratio"], PRECISION_STYLE[precision], marker="o", color=colors[ctx])
        ax.axhline(3.0, color="gray", lw=0.8, ls=":")
        size_axis(ax, ratios)
        ax.set(ylabel="(forward + backward) / forward", title=f"Cost of the backward pass ({compile_})")
    _legend(axes[0][0], colors)
    save(fig, path)


def bf16_speedup(e2e: pd.DataFrame, path: Path) -> None:
    """Rows: eager, compiled. Columns: modes. One line per context."""
    fp32, bf16 = grid.PRECISIONS  # the baseline first
    gains = speedup(e2e, "precision", fp32, bf16)
    if gains.empty:
        return no_graphed_times(path, "bf16 speed-up")
    compiles = [c for c in grid.COMPILE_MODES if c in set(gains["compile"])]
    modes = [m for m in MODE_LABELS if m in set(gains["mode"])]
    colors = context_colors(gains["context_length"])
    fig, axes = figure(ncols=max(1, len(modes)), nrows=max(1, len(compiles)))
    for row, compile_ in enumerate(compiles):
        for col, mode in enumerate(modes):
            ax = axes[row][col]
            subset = gains[(gains["compile"] == compile_) & (gains["mode"] == mode)]
            for ctx, group in subset.groupby("context_length"):
                group = group.sort_values("params")
                ax.plot(group["params"] / 1e6, group["speedup"], marker="o", color=colors[ctx])
            ax.axhline(1.0, color="gray", lw=0.8, ls=":")
            size_axis(ax, gains)
            ax.set(ylabel="fp32 time / bf16 time", title=f"bf16 speed-up: {MODE_LABELS[mode]}, {compile_}")
    _legend(axes[0][0], colors, precisions=())
    save(fig, path)


def host_overhead(e2e: pd.DataFrame, path: Path) -> None:
    """Launched (open) and graphed (filled) train-step time vs size, per precision and compile mode, at
    each context: the gap between the two is the host's launch overhead."""
    launched, graphed = step_times(e2e, LAUNCHED_MS), step_times(e2e, GPU_MS)
    if graphed.empty:
        return no_graphed_times(path, "Launched vs graphed step time")
    regimes = [
        (p, c)
        for p in grid.PRECISIONS
        for c in grid.COMPILE_MODES
        if ((graphed["precision"] == p) & (graphed["compile"] == c)).any()
    ]
    colors = context_colors(graphed["context_length"])
    fig, axes = figure(ncols=max(1, len(regimes)))
    for ax, (precision, compile_) in zip(axes[0], regimes):
        for frame, fill in ((launched, "none"), (graphed, None)):
            subset = frame[(frame["precision"] == precision) & (frame["compile"] == compile_)]
            for ctx, group in subset.groupby("context_length"):
                group = group.sort_values("params")
                ax.plot(
                    group["params"] / 1e6,
                    group["train_step"],
                    marker="o",
                    color=colors[ctx],
                    mfc=fill,
                    ls=":" if fill else "-",
                )
        size_axis(ax, graphed)
        ax.set(yscale="log", ylabel="train step (ms)", title=f"{precision}, {compile_}: launched (open) vs graphed")
    _legend(axes[0][0], colors, precisions=())
    save(fig, path)


def warmup_spread(warmup: pd.DataFrame, path: Path) -> None:
    """The measured median of each fresh process against its warm-up steps: the spread is the host."""
    rows = ok(warmup)
    fig, axes = figure()
    ax = axes[0][0]
    for i, ((size, mode), group) in enumerate(rows.groupby(["size", "mode"])):
        ax.plot(
            group["warmup_steps"] + 0.08 * i, group["median_ms"], "o", alpha=0.7, label=f"{size}, {MODE_LABELS[mode]}"
        )
    ax.set(
        yscale="log",
        xlabel="warm-up steps",
        ylabel="measured median (ms), one per process",
        title="Warm-up across fresh processes",
    )
    ax.legend(fontsize=7)
    save(fig, path)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--e2e", required=True)
    p.add_argument("--warmup", required=True)
    p.add_argument("--outdir", required=True)
    args = p.parse_args(argv)
    e2e, warmup, out = handout_model(pd.read_csv(args.e2e)), pd.read_csv(args.warmup), Path(args.outdir)
    time_vs_size(e2e, out / "e2e_time_vs_size.png")
    ratio_vs_size(e2e, out / "e2e_backward_ratio.png")
    bf16_speedup(e2e, out / "e2e_bf16_speedup.png")
    host_overhead(e2e, out / "e2e_host_overhead.png")
    warmup_spread(warmup, out / "warmup_cv.png")


if __name__ == "__main__":
    to_stderr()
    main()
