"""One look for every figure: headless backend, size, grid, and atomic PNG writes."""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmperf import grid
from lmperf.measure.rows import atomic_path  # noqa: E402

SIZE_ORDER = list(grid.SIZES)
MODE_LABELS = {"forward": "forward", "forward_backward": "forward + backward", "train_step": "train step"}


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.6, height: float = 3.4):
    """A grid of axes (always 2-D: axes[row][col]) with light grid lines."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
    return fig, axes


def save(fig, path: str | os.PathLike) -> None:
    """Save as PNG through a temporary file, so an interrupted run leaves no truncated image."""
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=130, format="png")
    finally:
        plt.close(fig)


def not_drawn(path: str | os.PathLike, title: str, reason: str) -> None:
    """A figure with no data to draw: its title and why it is empty, so that no two placeholders look
    alike and none is an empty pair of axes."""
    fig, axes = figure()
    ax = axes[0][0]
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, f"not drawn:\n{reason}", ha="center", va="center", wrap=True, transform=ax.transAxes)
    save(fig, path)


def context_colors(contexts) -> dict:
    """One colour per context length, light to dark along a sequential colormap."""
    contexts = sorted(set(contexts))
    cmap = plt.get_cmap("viridis")
    return {c: cmap(0.85 * i / max(1, len(contexts) - 1)) for i, c in enumerate(contexts)}


PRECISION_STYLE = {"fp32": "-", "bf16": "--"}


def size_axis(ax, frame) -> None:
    """Log x axis of parameter counts, ticked and labelled with the size names."""
    ticks = frame.drop_duplicates("size").sort_values("params")
    ax.set_xscale("log")
    ax.set_xticks(ticks["params"] / 1e6, ticks["size"])
    ax.minorticks_off()
    ax.set_xlabel("model size")


def sort_by_size(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Sort by ``columns``, ordering the 'size' column small -> 2.7B rather than alphabetically."""
    return frame.sort_values(columns, key=lambda c: c.map(SIZE_ORDER.index) if c.name == "size" else c)


def figure_cli(draw, input_name: str, description: str) -> None:
    """The command line of a one-figure module: --<input_name> CSV --out PNG, then draw(frame, out)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(f"--{input_name}", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    draw(pd.read_csv(getattr(args, input_name)), args.out)
