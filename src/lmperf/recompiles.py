"""torch.compile's recompile limit, raised where one function is compiled for many inputs, and a
function compiled for each input shape it meets.

With ``dynamic=False`` Dynamo compiles a function again for each new shape, grad mode or input
layout it meets, and past ``recompile_limit`` (8 by default) runs it uncompiled, with a warning and
no error: timings would then mix compiled and eager code under one label. The model's compiled
blocks (every context, attention variant and mode) and the tiled attention's compiled backward
(every sweep length, two gradient layouts) meet more than 8 in one process.
"""

import torch


def allow_recompiles(limit: int = 64) -> None:
    """Raise Dynamo's recompile limit, for the whole process, to at least ``limit`` (never lower it)."""
    for name in ("cache_size_limit", "recompile_limit"):  # the older name, and the one torch 2.6 added
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), limit))


def compile_per_shape(fn, **options):
    """``torch.compile(fn, **options)`` compiled again for each input shape (``dynamic=False``), the
    recompile limit raised for the shapes a sweep meets.

    Why not torch's default (``dynamic=None``): a function met at a second shape is compiled again
    with that size dynamic, and the one graph then serves every later shape. The timed kernels then
    depend on which shapes came first; for naive attention at fp32, d = 64 and 8192-16384 keys, the
    dynamic graph's forward took 1.20-1.29 times a graph compiled for the shape
    (notes/one-allocation.md, section 27). The model's blocks are compiled the same way
    (lmperf.training.compile_blocks).
    """
    allow_recompiles()
    return torch.compile(fn, dynamic=False, **options)
