"""One look for every figure: headless backend, size, grid, and atomic PNG writes."""

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SIZE_ORDER = ["nano", "tiny", "small", "medium", "large", "xl", "2.7B"]
MODE_LABELS = {"forward": "forward", "forward_backward": "forward + backward", "train_step": "train step"}


def figure(ncols: int = 1, width: float = 5.0, height: float = 3.6):
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    for ax in axes[0]:
        ax.grid(True, which="both", alpha=0.3)
    return fig, list(axes[0])


def save(fig, path: str | os.PathLike) -> None:
    """Save as PNG through a temporary file, so an interrupted run leaves no truncated image."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=130)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        plt.close(fig)


def size_rank(sizes):
    """Sort key that orders sizes small -> 2.7B rather than alphabetically."""
    return sizes.map(SIZE_ORDER.index)
