# pinned: b4151c725acc  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_gluon_backward._bwd_kernel, _delta_kernel, _as_rows and _shared_layout
"""A/B of the Gluon backward (lmperf.attention.flash_gluon_backward: five products, dQ added by TMA
bulk reductions; variant 20) against the portable backward and SDPA cuDNN, in one process: forward
+ backward (`o.sum().backward()`, as the leaderboard), interleaved rounds of do_bench medians. Before
timing, each shape's gradients are compared with the portable backward's and SDPA flash's, causal
and not, and the Gluon backward is run twice to see whether it repeats bitwise. Then the Gluon
kernel and the launch's other work (Delta with dQ's zeros, dQ's cast) are timed alone.

Ran at: df2059ed1037 (H100 80GB HBM3, variant 19), output: notes/flash_hopper/logs/2026-11-25-ab_backward-df2059e.txt
Ran at: uncommitted trees between df2059ed1037 and b4151c725acc (H100 80GB HBM3, variant 20's steps),
    outputs: notes/flash_hopper/logs/2026-11-25-ab_backward-v20-*.txt

    PYTHONPATH=src python notes/flash_hopper/ab_backward.py [--rounds 5] [--shapes 4x16x4096x64,...]

Variant 19's two warp-specialized kernels (seven products, or five with element atomics) are at
df2059e, with this script as it was then; ../flash-hopper.md has both variants' numbers.
"""

import argparse
import math
import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import passes, sdpa
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from lmperf.attention import flash_gluon
from lmperf.attention import flash_gluon_backward as fgb
from lmperf.attention.flash_triton import FlashAttentionTriton

cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)
gluon_unsupported = fgb.unsupported


def ours(gluon_backward, causal=True):
    def run(q, k, v):
        fgb.unsupported = gluon_unsupported if gluon_backward else (lambda *a: "off")
        return FlashAttentionTriton.apply(q, k, v, causal)

    return run


def grads(attend, q, k, v, do):
    x = [t.detach().requires_grad_() for t in (q, k, v)]
    attend(*x).backward(do)
    return [t.grad for t in x]


def check(q, k, v, causal):
    """Largest |gradient - reference| relative to the reference's largest, against the portable
    backward and SDPA flash; and whether two Gluon backwards are bitwise equal."""
    do = torch.randn_like(q)
    gluon, again, portable = (grads(ours(g, causal), q, k, v, do) for g in (True, True, False))
    flash = grads(lambda *x: torch.nn.functional.scaled_dot_product_attention(*x, is_causal=causal), q, k, v, do)

    def rel(a, b):
        return max((x.float() - y.float()).abs().max().item() / y.float().abs().max().item() for x, y in zip(a, b))

    return (
        f"causal={causal}: gluon vs portable {rel(gluon, portable):.2e}, gluon vs SDPA {rel(gluon, flash):.2e}, "
        f"portable vs SDPA {rel(portable, flash):.2e}, bitwise repeatable {all(map(torch.equal, gluon, again))}"
    )


def kernels_alone(q, k, v):
    """do_bench medians (ms) of the backward kernel alone and of the launch's torch work."""
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
    flash_gluon.forward(q, k, v, o, L, True)
    do = torch.randn_like(o)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    batch, heads, n, d = q.shape
    qd, kd, vd, dod = (fgb._as_rows(x, fgb.ROWS) for x in (q, k, v, do))
    delta = (o.float() * do.float()).sum(-1)
    dq_acc = torch.zeros(batch * heads * n, d, device=q.device, dtype=torch.float32)
    dq_desc = fgb.TensorDescriptor(
        dq_acc, [batch * heads * n, d], [d, 1], [fgb.ROWS, d], fgb._shared_layout((fgb.ROWS, d), fgb.gl.float32)
    )
    scales = (1 / math.sqrt(d), fgb.LOG2E / math.sqrt(d))

    def kernel():
        fgb._bwd_kernel[(n // (2 * fgb.ROWS), batch * heads)](
            qd[0], kd[0], vd[0], dod[0], dq_desc, dk, dv, L, delta, n, heads,
            *qd[1:], *kd[1:], *vd[1:], *dod[1:], *dk.stride()[:3], *dv.stride()[:3], *scales,
            IS_CAUSAL=True, num_warps=4, maxnreg=fgb.WS_LAUNCH_REGS,
        )  # fmt: skip

    steps = {
        "kernel": kernel,
        "delta": lambda: fgb._delta_kernel[(n // fgb.ROWS, batch * heads)](
            o, do, delta, dq_acc, n, heads, *o.stride()[:3], *do.stride()[:3], D=d, BLOCK=fgb.ROWS
        ),
        "cast": lambda: dq.copy_(dq_acc.view(batch, heads, n, d)),
        "whole backward": lambda: fgb.backward(q, k, v, o, do, L, dq, dk, dv, True),
    }
    return {name: round(do_bench(fn, warmup=50, rep=300, return_mode="median"), 4) for name, fn in steps.items()}


def compare(B, H, N, D, rounds):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    shape = f"{B}x{H}x{N}x{D}"
    print(shape, fgb.unsupported(q, k, v, q) or "gluon backward supported", flush=True)
    for causal in (True, False):
        print(shape, check(q, k, v, causal), flush=True)
    fns = {"portable": ours(False), "gluon tma": ours(True), "cudnn": cudnn_attention}
    steps = {name: passes(fn, *(t.requires_grad_() for t in (q, k, v)))["forward_backward"] for name, fn in fns.items()}
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            times[name].append(do_bench(fn, warmup=50, rep=300, return_mode="median"))
    flops = 3.5 * 4 * B * H * N * N * D / 2
    for name, xs in times.items():
        ms = statistics.median(xs)
        wins = sum(x < y for x, y in zip(xs, times["cudnn"]))
        print(
            f"{shape} fwd+bwd {name:>9} {ms:.4f} ms ({flops / ms / 1e9:.0f} TF/s) "
            f"x{statistics.median(times['portable']) / ms:.3f} of portable, "
            f"x{statistics.median(times['cudnn']) / ms:.3f} of cudnn, faster than cudnn in {wins}/{rounds} "
            f"{[round(x, 4) for x in xs]}",
            flush=True,
        )
    print(shape, "alone (ms):", kernels_alone(q.detach(), k.detach(), v.detach()), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="16x1x16384x64,4x16x4096x64,1x16x8192x64")
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__)
    for shape in args.shapes.split(","):
        compare(*map(int, shape.split("x")), args.rounds)
