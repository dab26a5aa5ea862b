# pinned: 7efdd7378436  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_gluon._fwd_kernel, _launch and _as_rows, flash_triton._portable_forward
"""Host time of one attention forward call, piece by piece, at a model shape (small, context 512).

Ran at: 35b05cba5d82, fd046ea5a57d and 7efdd7378436 (H100 80GB HBM3), output: the table of
    notes/flash-hopper.md, "Host time per call" (not kept as a file)

The kernel itself takes tens of microseconds here, so the host decides the launched time: at
9098f76 our call cost 225 us of host time against SDPA's 34 us (notes/flash-hopper.md).

    PYTHONPATH=src python notes/flash_hopper/host_cost.py
"""

import statistics
import time

import torch
import torch.nn.functional as F

from lmperf.attention import flash_gluon as fg
from lmperf.attention.flash_triton import FlashAttentionTriton, _portable_forward

B, H, N, D = 4, 12, 512, 64
# as the model makes them: (batch, seq, heads, d) projections seen as (batch, heads, seq, d)
q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
packed = torch.randn(B, N, 3, H, D, device="cuda", dtype=torch.bfloat16)  # one fused projection: not dense
qp, kp, vp = (packed[:, :, i].transpose(1, 2) for i in range(3))
o = torch.empty(B, N, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
L = torch.empty(B, H, N, device="cuda")
qg = q.detach().requires_grad_()
KEY_TILE, STAGES = fg.tiling(N, D)
descs = [fg._as_rows(x, t) for x, t in ((q, fg.BLOCK_M), (k, KEY_TILE), (v, KEY_TILE))]


def launch_prebuilt():
    qd, kd, vd = descs
    fg._fwd_kernel[(N // fg.BLOCK_M, B * H)](
        qd[0], kd[0], vd[0], o, L, N, H, *qd[1:], *kd[1:], *vd[1:], *o.stride()[:3], 0.18,
        IS_CAUSAL=True, STAGES=STAGES, num_warps=fg.NUM_WARPS,
    )  # fmt: skip


# The same launch registered through the low-level Library API: the dispatcher calls it directly,
# without CustomOpDef's Python wrapper around the kernel.
_lib = torch.library.Library("lmperf_notes", "DEF")
_lib.define("fwd(Tensor q, Tensor k, Tensor v, Tensor(a!) o, Tensor(b!) l, bool causal) -> ()")
_lib.impl("fwd", fg._launch, "CUDA")


def compiled_attention(fn):
    compiled = torch.compile(lambda q, k, v: fn(q, k, v) * 1)  # one op beside it, as in a block

    def call():
        with torch.no_grad():
            return compiled(q, k, v)

    call()
    return call


PIECES = {
    "sdpa (no grad)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "sdpa (grad)": lambda: F.scaled_dot_product_attention(qg, k, v, is_causal=True),
    "FlashAttentionTriton.apply (no grad)": lambda: FlashAttentionTriton.apply(q, k, v, True),
    "FlashAttentionTriton.apply (grad)": lambda: FlashAttentionTriton.apply(qg, k, v, True),
    "FlashAttentionTriton.apply (packed q, k, v)": lambda: FlashAttentionTriton.apply(qp, kp, vp, True),
    "unsupported()": lambda: fg.unsupported(q, k, v),
    "3 x _as_rows (TMA descriptors)": lambda: [fg._as_rows(x, 64) for x in (q, k, v)],
    "flash_gluon.forward, direct": lambda: fg.forward(q, k, v, o, L, True),
    "torch.ops.lmperf.gluon_attention_forward": lambda: torch.ops.lmperf.gluon_attention_forward(q, k, v, o, L, True),
    "Library.impl op (no CustomOpDef wrapper)": lambda: torch.ops.lmperf_notes.fwd(q, k, v, o, L, True),
    "kernel launch, descriptors prebuilt": launch_prebuilt,
    "compiled: ours (no grad)": compiled_attention(lambda q, k, v: FlashAttentionTriton.apply(q, k, v, True)),
    "compiled: sdpa (no grad)": compiled_attention(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ),
    "portable forward (tl kernel)": lambda: _portable_forward(q, k, v, o, L, True),
}


def host_us(fn, calls=50, rounds=15):
    """Median over rounds of the host time per call, syncing between rounds so the queue stays short."""
    for _ in range(10):
        fn()
    per_call = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per_call)


for name, fn in PIECES.items():
    print(f"{name:45s} {host_us(fn):7.1f} us")
