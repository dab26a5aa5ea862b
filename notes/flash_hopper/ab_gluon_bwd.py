"""Variant 11 on the GPU: the Gluon dK/dV kernel against the portable one inside FlashAttentionTriton,
and SDPA cuDNN, fwd+bwd at the leaderboard shape: five interleaved rounds of do_bench medians, one
process. First the two paths' dK and dV are compared with each other.

    PYTHONPATH=src python notes/flash_hopper/ab_gluon_bwd.py
"""

import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import sdpa
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from lmperf.attention import flash_gluon
from lmperf.attention.flash_triton import FlashAttentionTriton

gluon_backward = flash_gluon.unsupported_backward
cudnn_attention = sdpa(SDPBackend.CUDNN_ATTENTION)


def ours(keys):
    """FlashAttentionTriton with the Gluon dK/dV kernel over `keys` keys per program (0: portable)."""

    def run(q, k, v):
        flash_gluon.unsupported_backward = gluon_backward if keys else (lambda *a: "off")
        flash_gluon.DKDV_KEYS = keys or flash_gluon.DKDV_KEYS
        return FlashAttentionTriton.apply(q, k, v, True)

    return run


FNS = {"portable dK/dV": ours(0), "gluon 64 keys": ours(64), "gluon 128 keys": ours(128), "cudnn": cudnn_attention}


def grads(fn, q, k, v, grad_out):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    fn(q, k, v).backward(grad_out)
    return q.grad, k.grad, v.grad


for B, N, D in ((2, 1024, 64), (16, 16384, 64)):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        x.contiguous().requires_grad_()
        for x in torch.randn(3, B, N, D, device="cuda", dtype=torch.bfloat16, generator=g).unbind(0)
    )
    grad_out = torch.randn(B, N, D, device="cuda", dtype=torch.bfloat16, generator=g)
    a, b, b2, c = (grads(FNS[n], q, k, v, grad_out) for n in FNS)
    for name, x, y, y2, z in zip("qkv", a, b, b2, c):
        print(
            f"{B}x{N}x{D} d{name}: |gluon64 - portable| {(y.float() - x.float()).abs().max().item():.2e}, "
            f"|gluon128 - portable| {(y2.float() - x.float()).abs().max().item():.2e}, "
            f"|portable - cudnn| {(x.float() - z.float()).abs().max().item():.2e}"
        )

res = {name: [] for name in FNS}
for _ in range(5):
    for name, fn in FNS.items():
        res[name].append(
            do_bench(
                lambda: fn(q, k, v).sum().backward(), warmup=100, rep=1000, grad_to_none=[q, k, v], return_mode="median"
            )
        )
for name, xs in res.items():
    print(f"fwd+bwd {name:>16} {statistics.median(xs):.4f} ms  rounds {[round(x, 4) for x in xs]}")
