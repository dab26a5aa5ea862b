"""Variant 15 on the GPU: the Gluon forward with every k-th score's 2^x on the FMA pipe
(flash_gluon.EXP2_EVERY = k; 0 keeps every exponential on MUFU), interleaved with SDPA cuDNN,
in one process. Rounds of do_bench medians at the leaderboard shape and at d = 128; at the large
model's shape (4 x 20 heads x 1024, d 64) the call is replayed as a CUDA graph, since launching it
costs the host more than the kernel takes.

    git checkout 2f35ec3 -- src/lmperf/attention/flash_gluon.py  # the variant, reverted since
    PYTHONPATH=src python notes/flash_hopper/ab_poly.py [rounds]
"""

import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import sdpa
from torch.nn.attention import SDPBackend
from triton.testing import do_bench, do_bench_cudagraph

from lmperf.attention import flash_gluon
from lmperf.attention.flash_triton import _portable_forward

EVERY = (0, 16, 8, 4)
cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)


def gluon(q, k, v, every):
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)

    def run():
        flash_gluon.EXP2_EVERY = every
        flash_gluon.forward(q, k, v, o, L, True)
        return o, L

    return run


def compare(B, H, N, D, rounds, graphed):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    o_ref, L_ref = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
    _portable_forward(q, k, v, o_ref, L_ref, True)
    fns = {f"every={e}": gluon(q, k, v, e) for e in EVERY}
    for name, fn in fns.items():
        o, L = fn()
        print(
            f"{B}x{H}x{N}x{D} {name}: max |O - portable| {(o.float() - o_ref.float()).abs().max().item():.2e}, "
            f"max |L - portable| {(L - L_ref).abs().max().item():.2e}"
        )
    fns["cudnn"] = lambda: cudnn_attention(q, k, v)
    bench = (
        (lambda fn: do_bench_cudagraph(fn, rep=200, return_mode="median"))
        if graphed
        else (lambda fn: do_bench(fn, warmup=100, rep=500, return_mode="median"))
    )
    flops = 4 * B * H * N * N * D / 2
    res = {name: [] for name in fns}
    with torch.no_grad():
        for _ in range(rounds):
            for name, fn in fns.items():
                res[name].append(bench(fn))
    flash_gluon.EXP2_EVERY = 0
    base = statistics.median(res["every=0"])
    for name, xs in res.items():
        ms = statistics.median(xs)
        wins = sum(x < y for x, y in zip(xs, res["every=0"]))
        print(
            f"{B}x{H}x{N}x{D} {'graphed' if graphed else 'launched'} {name:>9} {ms:.4f} ms "
            f"({flops / ms / 1e9:.0f} TF/s) x{base / ms:.3f} of every=0, faster in {wins}/{rounds} rounds  "
            f"{[round(x, 4) for x in xs]}"
        )


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(torch.cuda.get_device_name(), torch.__version__)
    compare(16, 1, 16384, 64, rounds, graphed=False)
    compare(16, 1, 8192, 128, rounds, graphed=False)
    compare(4, 20, 1024, 64, rounds, graphed=True)
