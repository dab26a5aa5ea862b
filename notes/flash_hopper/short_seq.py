# pinned: 1e881b9b7872  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton._bwd_dkdv_kernel, _bwd_dq_kernel, _configs and _tuned
"""Tiles for the model's short sequences: at batch 4, 20 and 25 heads (the large and xl
models), d = 64, context 512 and 1024, where SDPA's train step caught up with ours in the
in-model slice of 5f9f04996daf. Variants of our kernels against SDPA cuDNN and flash:

Ran at: 5f9f04996daf (H100 80GB HBM3, d = 64), output: the table of notes/flash-hopper.md, "The model's
    contexts (variant 13)" (not kept as a file)
Ran at: 1e881b9b7872 (H100 80GB HBM3, 32:1024:80 32:512:80 32:1024:64), output: the table of
    notes/flash-hopper.md, "The 2.7B model's shape (d = 80)"

- ours: the Gluon forward with 64 x 128 tiles, 2 stages; the portable backward, autotuned (as at
  5f9f04996daf, where this ran);
- fwd 64-key: the Gluon forward with 64-key tiles and 3 stages (less of the diagonal tile masked;
  since fd0f5449ca9d, ``flash_gluon.tiling``'s choice up to 2048 keys);
- bwd wide: the backward autotuned over a wider set of tiles, warps and stages (printed).

Each implementation's forward and forward + backward are captured as CUDA graphs (lmperf's
capture_graph) and replayed by do_bench, every one once per round, five rounds; medians.

    PYTHONPATH=src python notes/flash_hopper/short_seq.py [heads:seq[:d] ...]   (default 20:512 20:1024 25:512 25:1024, d 64)
"""

import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import model_qkv, passes, rounds, sdpa
from torch.nn.attention import SDPBackend

from lmperf.attention import flash_gluon, flash_triton
from lmperf.attention.flash_triton import FlashAttentionTriton, _bwd_dkdv_kernel, _bwd_dq_kernel, _configs, _tuned
from lmperf.measure.timing import GraphUnavailable, capture_graph

LANDED = flash_triton.KERNELS[torch.bfloat16]
WIDE = (
    LANDED[0],
    _tuned(
        _bwd_dkdv_kernel,
        _configs([(32, 128), (64, 64), (32, 64), (64, 128), (16, 64), (16, 128)], warps=[4, 8], stages=[2, 3, 4]),
    ),
    _tuned(
        _bwd_dq_kernel,
        _configs([(64, 64), (128, 64), (32, 32), (64, 32), (128, 32)], warps=[4, 8], stages=[2, 3, 4]),
    ),
)


def ours(kernels, key_tile, stages):
    def run(q, k, v):
        flash_triton.KERNELS[torch.bfloat16] = kernels
        flash_gluon.tiling = lambda n, d: (key_tile, stages)
        return FlashAttentionTriton.apply(q, k, v, True)

    return run


IMPLEMENTATIONS = {
    "ours": ours(LANDED, 128, 2),
    "fwd 64-key": ours(LANDED, 64, 3),
    "bwd wide": ours(WIDE, 128, 2),
    "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
}


SHAPES = [(*map(int, a.split(":")), 64)[:3] for a in sys.argv[1:]] or [
    (20, 512, 64),
    (20, 1024, 64),
    (25, 512, 64),
    (25, 1024, 64),
]
for heads, seq, d in SHAPES:
    q, k, v = model_qkv(4, heads, seq, d)
    reference = IMPLEMENTATIONS["sdpa_cudnn"](q, k, v).float()
    worst = {}
    for name, fn in IMPLEMENTATIONS.items():  # autotune and compile, outside any capture
        out = fn(q, k, v)
        out.sum().backward()
        worst[name] = (out.float() - reference).abs().max().item()
        del out
    del reference
    steps = {}
    for name, fn in IMPLEMENTATIONS.items():
        for pass_, run in passes(fn, q, k, v).items():
            try:
                steps[pass_, name] = capture_graph(run, torch.device("cuda"))
            except GraphUnavailable as error:
                print(f"{pass_} {name}: {error}")
    times = rounds(steps)
    print(f"\nbatch 4 heads {heads} seq {seq} d {d}, replayed graphs; max |O - cuDNN|: {worst}")
    for (pass_, name), xs in sorted(times.items()):
        us = [x * 1e3 for x in xs]
        print(f"{pass_:>16} {name:>11} {statistics.median(us):9.1f} us  [{min(us):.1f}, {max(us):.1f}]")
for name, kernel in (("dK/dV", WIDE[1]), ("dQ", WIDE[2]), ("landed dK/dV", LANDED[1]), ("landed dQ", LANDED[2])):
    for key, config in kernel.cache.items():
        print(name, key, config)
