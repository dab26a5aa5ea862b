"""Interleaved A/B at the leaderboard shape: our forward (portable kernel, this commit), the TMA
variant from hfwd.py, and SDPA cuDNN; five rounds of do_bench medians each.

Ran at: df15c42391aa (H100 80GB HBM3), output: variant 2 in notes/flash-hopper.md (not kept as a file)
"""

import math
import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import hfwd
import torch
from common import sdpa, use_torch_allocator
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from lmperf.kernels.flash_attention import FlashAttentionTriton


def main() -> None:
    use_torch_allocator()
    B, N, D = 16, 16384, 64
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        t.contiguous() for t in torch.randn(3, B, N, D, device="cuda", dtype=torch.bfloat16, generator=g).unbind(0)
    )

    cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)

    def cudnn():
        return cudnn_attention(q, k, v)

    def tma():
        o = torch.empty_like(q)
        L = torch.empty(B, N, device="cuda", dtype=torch.float32)
        hfwd.hfwd[(N // 128, B)](
            q,
            k,
            v,
            o,
            L,
            B,
            N,
            1 / math.sqrt(D) * 1.4426950408889634,
            D=D,
            BLOCK_Q=128,
            BLOCK_K=64,
            POLY=False,
            PERSISTENT=False,
            ROTATE=False,
            num_warps=8,
            num_stages=3,
        )

    ours = lambda: FlashAttentionTriton.apply(q, k, v, True)
    res = {"ours": [], "tma": [], "cudnn": []}
    with torch.no_grad():
        for r in range(5):
            for name, fn in (("ours", ours), ("tma", tma), ("cudnn", cudnn)):
                res[name].append(do_bench(fn, warmup=100, rep=1000, return_mode="median"))
    for name, xs in res.items():
        print(f"{name:>6} median of 5 rounds {statistics.median(xs):.4f} ms  rounds {[round(x, 4) for x in xs]}")


if __name__ == "__main__":
    main()
