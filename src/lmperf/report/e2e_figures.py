"""Figures of the end-to-end study: step time vs size, backward/forward ratio, bf16 speed-up, warm-up CV.

Conventions shared by all: colour = context length, line style = precision (solid fp32, dashed
bf16), x = model size on a log axis of parameter counts.
"""

import argparse
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from lmperf.report.e2e_analysis import backward_ratio, handout_model, mean_times, speedup
from lmperf.report.markdown import ok
from lmperf.report.style import MODE_LABELS, PRECISION_STYLE, context_colors, figure, save, size_axis


def _legend(ax, colors, precisions=("fp32", "bf16")) -> None:
    handles = [Line2D([], [], color=c, marker="o", label=f"ctx {ctx}") for ctx, c in colors.items()]
    handles += [Line2D([], [], color="gray", ls=PRECISION_STYLE[p], label=p) for p in precisions]
    ax.legend(handles=handles, fontsize=7)


def time_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    """Rows: eager, compiled. Columns: forward, forward+backward, train step."""
    times = mean_times(e2e)
    modes = [m for m in MODE_LABELS if m in times.columns]
    compiles = [c for c in ("eager", "compiled") if c in set(times["compile"])]
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
            ax.set(yscale="log", ylabel="mean step time (ms)", title=f"{MODE_LABELS[mode]}, {compile_}")
    _legend(axes[0][0], colors)
    save(fig, path)


def ratio_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    ratios = backward_ratio(e2e)
    compiles = [c for c in ("eager", "compiled") if c in set(ratios["compile"])]
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
    gains = speedup(e2e, "precision", "fp32", "bf16")
    compiles = [c for c in ("eager", "compiled") if c in set(gains["compile"])]
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


def warmup_cv(warmup: pd.DataFrame, path: Path) -> None:
    rows = ok(warmup)
    fig, axes = figure()
    ax = axes[0][0]
    for (size, mode), group in rows.groupby(["size", "mode"]):
        group = group.sort_values("warmup_steps")
        ax.plot(group["warmup_steps"], 100 * group["cv"], marker="o", label=f"{size}, {MODE_LABELS[mode]}")
    ax.set(yscale="log", xlabel="warm-up steps", ylabel="CV of measured steps (%)", title="Variation vs warm-up")
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
    warmup_cv(warmup, out / "warmup_cv.png")


if __name__ == "__main__":
    main()
