"""The "Active memory timeline" of one recorded step, offline: live allocations stacked over the
allocation trace, the frames that made the largest allocations in their own colours, phases shaded."""

import pandas as pd

from lmperf.memory_trace import largest_allocations, live_by_frame
from lmperf.report.style import figure, save

TOP_FRAMES = 6
PHASE_COLORS = ("#f2f2f2", "#e0ecf8", "#fdebd3", "#e5f5e0")


def timeline(events: pd.DataFrame, phases: pd.DataFrame, path, title: str = "") -> None:
    fig, axes = figure(width=9.0, height=3.8)
    ax = axes[0][0]
    frames = [f for f in largest_allocations(events)["frame"].drop_duplicates() if f][:TOP_FRAMES]
    if events.loc[events["action"] == "free", "addr"].isna().any():
        frames = []  # frees without addresses (torch.profiler) cannot be charged to a frame: total only
    live = live_by_frame(events, frames).clip(lower=0) / 2**20
    if len(live):
        labels = [f.split("/", 1)[-1] for f in frames] + ["other"]
        ax.stackplot(live.index, *[live[c] for c in live.columns], labels=labels, linewidth=0)
        ax.legend(fontsize=6, loc="upper left")
    start = 0
    for i, (phase, end) in enumerate(zip(phases["phase"], phases["trace_position"])):
        end = int(end) if pd.notna(end) else start
        ax.axvspan(start, end, color=PHASE_COLORS[i % len(PHASE_COLORS)], zorder=0)
        ax.axvline(end, color="black", linewidth=0.6)
        ax.annotate(phase, (end, 1.0), xycoords=("data", "axes fraction"), rotation=90, fontsize=6, ha="right", va="top")
        start = end
    ax.set(xlabel="allocation trace (events)", ylabel="live memory (MiB)", title=title)
    save(fig, path)
