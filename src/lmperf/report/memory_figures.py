"""The "Active memory timeline" of one recorded run, from the memory study's CSVs: live memory along
the allocation trace stacked by what it is (weights, optimizer state, gradients, activations and
temporaries), phases shaded, one band per step.

    python -m lmperf.report.memory_figures --timeline results/memory/fp32-train_step-ctx128-timeline.csv \\
        --phases results/memory/fp32-train_step-ctx128-phases.csv --out report/figures/memory/fp32-train_step-ctx128.png
"""

import argparse

import pandas as pd

from lmperf.log import to_stderr
from lmperf.report.style import figure, save

STAGE_COLORS = {"build": "#f2f2f2", "forward": "#e0ecf8", "backward": "#fdebd3", "optimizer step": "#e5f5e0"}
KEYS = ("event", "step", "mode", "precision", "context_length", "commit")


def timeline(series: pd.DataFrame, phases: pd.DataFrame, path, title: str = "") -> None:
    fig, axes = figure(width=9.0, height=3.8)
    ax = axes[0][0]
    columns = [c for c in series.columns if c not in KEYS]
    if len(series):
        ax.stackplot(series["event"], *[series[c] for c in columns], labels=columns, linewidth=0)
        ax.legend(fontsize=6, loc="upper left")
    start = 0
    for phase, end, stage in zip(phases["phase"], phases["trace_position"], phases["stage"]):
        end = int(end) if pd.notna(end) else start
        ax.axvspan(start, end, color=STAGE_COLORS.get(stage, "#ffffff"), zorder=0)
        ax.axvline(end, color="black", linewidth=0.4)
        if stage in ("build", "optimizer step") or phase == phases["phase"].iloc[-1]:
            ax.annotate(
                phase, (end, 1.0), xycoords=("data", "axes fraction"), rotation=90, fontsize=6, ha="right", va="top"
            )
        start = end
    ax.set(xlabel="allocation trace (events)", ylabel="live memory (MiB)", title=title)
    save(fig, path)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeline", required=True)
    p.add_argument("--phases", required=True)
    p.add_argument("--title", default="")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    timeline(pd.read_csv(args.timeline), pd.read_csv(args.phases), args.out, args.title)


if __name__ == "__main__":
    to_stderr()
    main()
