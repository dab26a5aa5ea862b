"""Named ranges for profilers: NVTX (Nsight Systems) and record_function (torch.profiler).

Off by default, so timing runs pay nothing: ``profiled_range`` is then a shared no-op context.
Profiling runs call ``enable()`` first.
"""

from contextlib import contextmanager, nullcontext

import torch

_enabled = False
_NO_RANGE = nullcontext()


def enable(on: bool = True) -> None:
    global _enabled
    _enabled = on


def enabled() -> bool:
    return _enabled


@contextmanager
def _both(name: str):
    use_nvtx = torch.cuda.is_available()
    if use_nvtx:
        torch.cuda.nvtx.range_push(name)
    try:
        with torch.autograd.profiler.record_function(name):
            yield
    finally:
        if use_nvtx:
            torch.cuda.nvtx.range_pop()


def profiled_range(name: str):
    """An NVTX + record_function range named ``name`` while profiling, a no-op otherwise."""
    return _both(name) if _enabled else _NO_RANGE
