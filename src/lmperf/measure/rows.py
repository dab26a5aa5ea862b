"""Tidy result rows and their atomic CSV write (a killed run never leaves half a file)."""

import os
import signal
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from lmperf.measure.phases import phase, write_split

STATUSES = ("ok", "oom", "skipped", "error")


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; on success rename it over ``path``, on error remove it.

    rename() within one directory is atomic on POSIX, so readers (and Snakemake after a SIGKILL)
    see either no file or the whole file. The file gets the usual umask permissions, not mkstemp's 0600.
    A SIGTERM while the file is written (a time limit, torchrun stopping its ranks) exits through
    the removal too, so no temporary file is left beside the output; a SIGKILL can still leave one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with exit_on_sigterm():
            yield Path(tmp)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def exit_on_sigterm():
    """Inside the block, SIGTERM raises SystemExit (so ``finally`` clauses run) instead of ending the
    process at once; outside it, the handler that was there. Only the main thread can set one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:  # None: a handler set outside Python, which Python cannot put back; the default then
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


def write_csv_atomic(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        frame.to_csv(f, index=False)
        f.flush()
        os.fsync(f.fileno())


def write_rows(rows: list[dict], path: str | os.PathLike, cost: bool = True) -> pd.DataFrame:
    """Rows (dicts with the same keys, one with a 'status') -> CSV at ``path``, atomically; then, for a
    job's main output (``cost``), where the job's time went so far, beside it (lmperf.measure.phases)."""
    bad = [r.get("status") for r in rows if r.get("status") not in STATUSES]
    if bad:
        raise ValueError(f"rows need a status in {STATUSES}, got {bad}")
    with phase("write"):
        frame = pd.DataFrame(rows)
        write_csv_atomic(frame, path)
    if cost:
        write_split(path)
    return frame
