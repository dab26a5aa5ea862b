"""Tidy result rows and their atomic CSV write (a killed run never leaves half a file)."""

import os
import tempfile
from pathlib import Path

import pandas as pd

STATUSES = ("ok", "oom", "skipped", "error")


def write_csv_atomic(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over it.

    rename() within one directory is atomic on POSIX, so readers (and Snakemake after a SIGKILL)
    see either no file or the whole file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            frame.to_csv(f, index=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_rows(rows: list[dict], path: str | os.PathLike) -> pd.DataFrame:
    """Rows (dicts with the same keys, one with a 'status') -> CSV at ``path``, atomically."""
    bad = [r.get("status") for r in rows if r.get("status") not in STATUSES]
    if bad:
        raise ValueError(f"rows need a status in {STATUSES}, got {bad}")
    frame = pd.DataFrame(rows)
    write_csv_atomic(frame, path)
    return frame
