# pinned: 13e7c9aa1abf  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton._portable_forward
"""Variant 10 on the GPU: the Gluon forward (lmperf.attention.flash_gluon) interleaved with the
portable Triton forward and SDPA cuDNN, five rounds of do_bench medians in one process, at the
leaderboard shape (d = 64) and at d = 128 with both key-tile sizes.

Ran at: 59761bfbc1f5 and 13e7c9aa1abf (H100 80GB HBM3), output: the configurations table of
    notes/flash-hopper.md, "The forward in Gluon" (not kept as a file)

    PYTHONPATH=src python notes/flash_hopper/ab_gluon.py
"""

import math
import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import sdpa
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from lmperf.attention import flash_gluon
from lmperf.attention.flash_triton import _portable_forward

cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)


def gluon(q, k, v, block_n):
    def run():
        flash_gluon.tiling = lambda n, d: (block_n, 2)  # as variant 10 ran: 2 stages
        o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
        flash_gluon.forward(*(x.unsqueeze(1) for x in (q, k, v, o)), L, True)
        return o

    return run


def portable(q, k, v):
    def run():
        o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
        _portable_forward(q, k, v, o, L, True)
        return o

    return run


def compare(B, N, D):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        x.contiguous() for x in torch.randn(3, B, N, D, device="cuda", dtype=torch.bfloat16, generator=g).unbind(0)
    )
    fns = {"portable": portable(q, k, v), "cudnn": lambda: cudnn_attention(q, k, v)}
    for block_n in (128, 64):
        fns[f"gluon BLOCK_N={block_n}"] = gluon(q, k, v, block_n)
    default = flash_gluon.tiling
    ref = fns["portable"]()
    for name, fn in fns.items():
        print(f"{B}x{N}x{D} {name}: max |O - portable| {(fn().float() - ref.float()).abs().max().item():.2e}")
    flops = 4 * B * N * N * D / 2
    res = {name: [] for name in fns}
    with torch.no_grad():
        for _ in range(5):
            for name, fn in fns.items():
                res[name].append(do_bench(fn, warmup=100, rep=1000, return_mode="median"))
    flash_gluon.tiling = default
    for name, xs in res.items():
        ms = statistics.median(xs)
        print(f"{B}x{N}x{D} {name:>20} {ms:.4f} ms ({flops / ms / 1e9:.0f} TF/s)  rounds {[round(x, 4) for x in xs]}")


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, "scale", 1 / math.sqrt(64))
    compare(16, 16384, 64)
    compare(16, 8192, 128)
