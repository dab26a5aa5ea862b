"""Figures of the end-to-end study: step time vs size, backward/forward ratio, bf16 speed-up, warm-up CV."""

import argparse
from pathlib import Path

import pandas as pd

from lmperf.report.e2e_analysis import backward_ratio, mean_times, ok, speedup
from lmperf.report.style import MODE_LABELS, figure, save


def time_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    times = mean_times(e2e)
    modes = [m for m in MODE_LABELS if m in times.columns]
    fig, axes = figure(ncols=len(modes))
    for ax, mode in zip(axes, modes):
        for (precision, compile_, ctx), group in times.groupby(["precision", "compile", "context_length"]):
            group = group.sort_values("params")
            style = "-" if precision == "fp32" else "--"
            marker = "o" if compile_ == "eager" else "s"
            ax.plot(group["params"] / 1e6, group[mode], style, marker=marker, label=f"ctx {ctx}, {precision}, {compile_}")
        ax.set(xscale="log", yscale="log", xlabel="parameters (M)", ylabel="mean step time (ms)", title=MODE_LABELS[mode])
    axes[-1].legend(fontsize=6, ncol=2)
    save(fig, path)


def ratio_vs_size(e2e: pd.DataFrame, path: Path) -> None:
    ratios = backward_ratio(e2e)
    fig, (ax,) = figure()
    for (precision, compile_, ctx), group in ratios.groupby(["precision", "compile", "context_length"]):
        group = group.sort_values("params")
        ax.plot(group["params"] / 1e6, group["ratio"], "-o" if precision == "fp32" else "--s", label=f"ctx {ctx}, {precision}, {compile_}")
    ax.axhline(3.0, color="gray", lw=0.8, ls=":")
    ax.set(xscale="log", xlabel="parameters (M)", ylabel="(forward + backward) / forward", title="Cost of the backward pass")
    ax.legend(fontsize=6, ncol=2)
    save(fig, path)


def bf16_speedup(e2e: pd.DataFrame, path: Path) -> None:
    gains = speedup(e2e, "precision", "fp32", "bf16")
    fig, axes = figure(ncols=max(1, gains["compile"].nunique()))
    for ax, (compile_, by_compile) in zip(axes, gains.groupby("compile")):
        for (mode, ctx), group in by_compile.groupby(["mode", "context_length"]):
            group = group.sort_values("params")
            ax.plot(group["params"] / 1e6, group["speedup"], marker="o", label=f"{MODE_LABELS[mode]}, ctx {ctx}")
        ax.axhline(1.0, color="gray", lw=0.8, ls=":")
        ax.set(xscale="log", xlabel="parameters (M)", ylabel="fp32 time / bf16 time", title=f"bf16 autocast speed-up ({compile_})")
        ax.legend(fontsize=6)
    save(fig, path)


def warmup_cv(warmup: pd.DataFrame, path: Path) -> None:
    rows = ok(warmup)
    fig, (ax,) = figure()
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
    e2e, warmup, out = pd.read_csv(args.e2e), pd.read_csv(args.warmup), Path(args.outdir)
    time_vs_size(e2e, out / "e2e_time_vs_size.png")
    ratio_vs_size(e2e, out / "e2e_backward_ratio.png")
    bf16_speedup(e2e, out / "e2e_bf16_speedup.png")
    warmup_cv(warmup, out / "warmup_cv.png")


if __name__ == "__main__":
    main()
