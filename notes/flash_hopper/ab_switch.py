# pinned: c3101e47bad1  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton._portable_forward and switches since reverted
"""A/B of one module-level switch of the Gluon forward (lmperf.attention.flash_gluon), in one
process: each value of the switch interleaved with SDPA cuDNN, rounds of do_bench medians at the
leaderboard shape, at d = 128, and at the large model's shape (4 x 20 heads x 1024, d 64) replayed
as a CUDA graph (launching it costs the host more than the kernel takes). Before timing, each value's
O and L are compared with the portable kernel's, and its forward + backward gradients (the
backward reads L) with SDPA flash's.

Ran at: 71be283a0430 (ROW_SUM_MMA) and 1fb20af9bbcc (LAZY_RESCALE) (H100 80GB HBM3), output: the tables of
    notes/flash-hopper.md, variants 16 and 17 (not kept as files)
Ran at: an uncommitted tree before c13199c68e9b (PINGPONG, H100 80GB HBM3), output: variant 18's table there
Ran at: df2059ed1037 (SHORT, H100 80GB HBM3), output: notes/flash_hopper/logs/2026-11-25-ab_switch-SHORT.txt

    PYTHONPATH=src python notes/flash_hopper/ab_switch.py SWITCH 0 1 [--rounds 7]

The switches were the variants' and were reverted after them: check out the kernel first, e.g.
`git checkout 71be283 -- src/lmperf/attention/flash_gluon.py` for ROW_SUM_MMA (variant 16) or
1fb20af for LAZY_RESCALE (variant 17). PINGPONG (variant 18) was an uncommitted working tree; the
warp-specialized kernel landed without the switch.
"""

import argparse
import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import sdpa
from torch.nn.attention import SDPBackend
from triton.testing import do_bench, do_bench_cudagraph

from lmperf.attention import flash_gluon
from lmperf.attention.flash_triton import FlashAttentionTriton, _portable_forward

cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)
flash_attention = sdpa(SDPBackend.FLASH_ATTENTION)


def gluon(q, k, v, switch, value):
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)

    def run():
        setattr(flash_gluon, switch, value)
        flash_gluon.forward(q, k, v, o, L, True)
        return o, L

    return run


def check_gradients(q, k, v, switch, value):
    """Largest |gradient - SDPA flash's| over dQ, dK, dV, relative to the largest reference gradient."""
    setattr(flash_gluon, switch, value)
    do = torch.randn_like(q)
    grads = []
    for attend in (lambda *x: FlashAttentionTriton.apply(*x, True), flash_attention):
        x = [t.detach().requires_grad_() for t in (q, k, v)]
        attend(*x).backward(do)
        grads.append([t.grad.float() for t in x])
    return max((a - b).abs().max().item() / b.abs().max().item() for a, b in zip(*grads))


def compare(B, H, N, D, switch, values, rounds, graphed):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    o_ref, L_ref = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
    _portable_forward(q, k, v, o_ref, L_ref, True)
    shape = f"{B}x{H}x{N}x{D}"
    fns = {f"{switch}={value}": gluon(q, k, v, switch, value) for value in values}
    for (name, fn), value in zip(fns.items(), values):
        o, L = fn()
        print(
            f"{shape} {name}: max |O - portable| {(o.float() - o_ref.float()).abs().max().item():.2e}, "
            f"max |L - portable| {(L - L_ref).abs().max().item():.2e}, "
            f"gradients vs SDPA flash {check_gradients(q, k, v, switch, value):.2e} (relative)"
        )
    fns["cudnn"] = lambda: cudnn_attention(q, k, v)
    if graphed:
        bench = lambda fn: do_bench_cudagraph(fn, rep=200, return_mode="median")  # noqa: E731
    else:
        bench = lambda fn: do_bench(fn, warmup=100, rep=500, return_mode="median")  # noqa: E731
    flops = 4 * B * H * N * N * D / 2
    times = {name: [] for name in fns}
    with torch.no_grad():
        for _ in range(rounds):
            for name, fn in fns.items():
                times[name].append(bench(fn))
    first = next(iter(fns))
    for name, xs in times.items():
        ms = statistics.median(xs)
        wins = sum(x < y for x, y in zip(xs, times[first]))
        print(
            f"{shape} {'graphed' if graphed else 'launched'} {name:>15} {ms:.4f} ms ({flops / ms / 1e9:.0f} TF/s) "
            f"x{statistics.median(times[first]) / ms:.3f} of {first}, faster in {wins}/{rounds} rounds "
            f"{[round(x, 4) for x in xs]}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("switch")
    parser.add_argument("values", nargs="+", type=int)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--shapes", help="B x H x N x D[g],... (g: graphed); default the three above")
    args = parser.parse_args()
    default = getattr(flash_gluon, args.switch)
    print(torch.cuda.get_device_name(), torch.__version__, f"{args.switch} default {default}")
    shapes = [(16, 1, 16384, 64, False), (16, 1, 8192, 128, False), (4, 20, 1024, 64, True)]
    if args.shapes:
        shapes = [(*map(int, s.rstrip("g").split("x")), s.endswith("g")) for s in args.shapes.split(",")]
    for B, H, N, D, graphed in shapes:
        compare(B, H, N, D, args.switch, args.values, args.rounds, graphed)
    setattr(flash_gluon, args.switch, default)
