"""Where a measuring job's wall time goes: start, build, warm-up, capture, settle, timed, profile,
check (the ladder's loss checks, steps trained to show its rungs compute the same thing), write.

A GPU run's cost is mostly not its timed steps: process start and imports, building the model,
compiling and autotuning (in the warm-up steps), capturing CUDA graphs, holding the GPU at its
power state. Code marks its phases with ``with phase("build"): ...``; nested phases count apart from
the phase around them. Entering a phase other than the one entered last is logged ("phase timed"),
so a job's log says which phase it is in. ``write_rows`` (lmperf.measure.rows) marks the "write" phase and then writes
the split so far beside the job's benchmark file (``benchmarks/`` mirrors ``results/``:
results/x/y.csv -> benchmarks/x/y.cost.csv): one row per phase, in seconds,
with ``start`` (from the job's start to the first phase: process start, imports, set-up) and
``other`` (the rest of the time until the write ended), so the rows sum to the job's time up to
its last write; each row also names the job's start (epoch seconds), the GPUs it ran on
(``CUDA_VISIBLE_DEVICES``) and the host. The job's start is ``LMPERF_JOB_START``, which
lmperf.gpu_slots, the first word of every measuring job's command, exports; a process started
otherwise counts from its own start. The report's "Cost of this run" reads these files. Only rank 0
of a multi-process job writes the split, and only for an output under a ``results/`` folder (a
study run by hand elsewhere writes none).

Why beside the benchmark and not the result: ``results/`` holds only what the rules declare, so a
job that fails after its write (a time limit in its last second) leaves nothing there once
Snakemake removes its outputs; and the split is a cost, as the benchmark file is.
"""

import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

PHASES = ("start", "build", "warmup", "capture", "settle", "timed", "profile", "check", "write", "other")

log = logging.getLogger(__name__)

_seconds: dict[str, float] = {}
_stack: list[list] = []  # [name, begin, seconds spent in nested phases]
_first_begin: list[float] = []
_entered: list[str] = [""]  # the phase entered last: the log says each change of phase once


@contextmanager
def phase(name: str):
    """Count the wall time of the block as phase ``name`` (one of PHASES), less its nested phases."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")
    if name != _entered[0]:
        log.info(f"phase {name}")
        _entered[0] = name
    begin = time.time()
    if not _first_begin:
        _first_begin.append(begin)
    _stack.append([name, begin, 0.0])
    try:
        yield
    finally:
        _, begin, nested = _stack.pop()
        elapsed = time.time() - begin
        _seconds[name] = _seconds.get(name, 0.0) + elapsed - nested
        if _stack:
            _stack[-1][2] += elapsed


def current() -> str:
    """The innermost phase running now; "" outside every phase."""
    return _stack[-1][0] if _stack else ""


def split(now: float | None = None, env=os.environ) -> dict[str, float]:
    """Seconds per phase from the job's start until ``now``: every phase in PHASES, zero where none ran."""
    now = time.time() if now is None else now
    begin = job_start(env)
    first = _first_begin[0] if _first_begin else now
    seconds = {name: 0.0 for name in PHASES}
    seconds.update(_seconds)
    seconds["start"] = max(first - begin, 0.0)
    seconds["other"] = max(now - begin - sum(v for k, v in seconds.items() if k != "other"), 0.0)
    return seconds


def sidecar(output: str | os.PathLike) -> Path | None:
    """Where the split of the job that writes ``output`` goes: results/x/y.csv -> benchmarks/x/y.cost.csv
    (the folder above ``results`` kept), or None for an output outside a ``results/`` folder."""
    parts = Path(output).parts
    if "results" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("results")
    return Path(*parts[:at], "benchmarks", *parts[at + 1 :]).with_suffix(".cost.csv")


def write_split(output: str | os.PathLike, env=os.environ) -> Path | None:
    """Write the split so far for the job whose main output is ``output`` (see the module's docstring);
    its path, or None where none is written (a rank other than 0, an output outside results/)."""
    path = sidecar(output)
    if path is None or env.get("RANK", "0") != "0":
        return None
    from lmperf.measure.rows import write_csv_atomic  # rows imports this module

    seconds = split(env=env)
    frame = pd.DataFrame({"phase": list(seconds), "seconds": list(seconds.values())}).assign(
        job_start=job_start(env),
        gpus=env.get("CUDA_VISIBLE_DEVICES", ""),
        host=socket.gethostname(),
    )
    write_csv_atomic(frame, path)
    return path


def job_start(env=os.environ) -> float:
    """When the job started (epoch seconds): ``LMPERF_JOB_START``, else this process's start."""
    return float(env.get("LMPERF_JOB_START") or _process_start())


def _process_start() -> float:
    """When this process started (the job's start where the pipeline gave none)."""
    try:
        import psutil

        return psutil.Process().create_time()
    except ImportError:
        return _first_begin[0] if _first_begin else time.time()


def reset() -> None:
    """Forget the phases recorded so far (for tests)."""
    _seconds.clear()
    _stack.clear()
    _first_begin.clear()
    _entered[0] = ""
