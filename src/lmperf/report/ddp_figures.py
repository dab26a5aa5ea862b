"""Data-parallel figure: the GPU kernels of one training step on rank 0, per world size, DDP variant
and CUDA stream, compute and NCCL communication in two colours, so overlap (or its absence) is visible. Each
panel's title names the profiler and the traced step's time beside the untraced median."""

import pandas as pd

from lmperf.log import to_stderr
from lmperf.report.markdown import ok
from lmperf.report.style import figure, figure_cli, not_drawn, save

COLORS = {"compute": "tab:blue", "communication": "tab:orange"}


def timeline(rows: pd.DataFrame, path) -> None:
    if ok(rows).empty:
        reason = rows["note"].dropna().iloc[0] if "note" in rows and rows["note"].notna().any() else "no rows"
        return not_drawn(path, "DDP: kernel timeline of one training step", reason)
    rows = ok(rows)
    panels = list(rows.groupby(["world_size", "variant"], sort=False))  # per world size, each variant traced
    fig, axes = figure(nrows=len(panels), width=9.0, height=2.4)
    for ax, ((world, variant), group) in zip(axes[:, 0], panels):
        streams = sorted(group["stream"].unique())
        for y, stream in enumerate(streams):
            for kind, color in COLORS.items():
                spans = group[(group["stream"] == stream) & (group["kind"] == kind)]
                ax.broken_barh(
                    list(zip(spans["start_ms"], spans["duration_ms"])),
                    (y - 0.4, 0.8),
                    color=color,
                    label=kind if y == 0 or kind == "communication" else None,
                )
        ax.set_yticks(range(len(streams)), [f"stream {s}" for s in streams])
        title = f"{variant}, {int(world)} ranks (one step, rank 0)"
        if "traced_step_ms" in group:  # what tracing cost: the traced step against the untraced median
            first = group.iloc[0]
            title += (
                f"\n{first['profiler']}: step {first['traced_step_ms']:.1f} ms traced, "
                f"{first['untraced_step_ms']:.1f} ms untraced (median)"
            )
        ax.set(title=title, xlabel="time since first kernel (ms)")
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left")
    save(fig, path)


if __name__ == "__main__":
    to_stderr()
    figure_cli(timeline, "timeline", __doc__)
