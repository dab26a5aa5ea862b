# pinned: 195c848b5b92  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton._dims, _strides and _precision
"""Does our attention backward, traced by torch.compile, copy dO? And as a custom op? (notes/ladder-power.md)

Ran at: 092440ee1941 (H100 80GB HBM3, that tree plus this script), output:
    notes/logs/2026-11-27-attention_backward_op-092440e.txt

A 2.7B-shaped FusedNormsLM of two layers (bf16 weights, bf16 autocast, our fused loss), its blocks
compiled as the ladder compiles them; two forward + backward passes, their gradients saved, then
one profiled. ``kernels``: the code as it is. ``op``: FlashAttentionTriton.backward replaced by a
call to a custom op (``lmperf::tbwd``) that launches the same portable kernels and declares dQ, dK
and dV written. ``TORCH_LOGS=output_code`` shows inductor's code.

    TORCH_LOGS=output_code PYTHONPATH=src python notes/attention_backward_op.py kernels
    TORCH_LOGS=output_code PYTHONPATH=src python notes/attention_backward_op.py op
"""

import dataclasses
import math
import sys

import torch
import triton

from lmperf.attention import flash_triton as ft
from lmperf.attention import get_attention
from lmperf.model import model_config
from lmperf.model.fused_cross_entropy import fused_cross_entropy
from lmperf.model.fused_rmsnorm import FusedNormsLM
from lmperf.model.transformer import Linear, TransformerLM
from lmperf.training import compile_blocks, random_batch

variant = sys.argv[1]
if variant == "op":

    def _portable_backward(Q, K, V, O, dO, L, dQ, dK, dV, is_causal):  # noqa: E741 - the kernels' names
        bh, heads, n_q, n_k, d = ft._dims(Q, K)
        d0, d1 = ft.head_blocks(d)
        scale = 1.0 / math.sqrt(d)
        delta = torch.empty_like(L)
        strides = (*ft._strides(Q), *ft._strides(K), *ft._strides(V))
        rest = (*ft._strides(dO), *L.stride()[-2:], n_q, n_k, heads, scale, scale * ft.LOG2E)
        flags = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=is_causal, PRECISION=ft._precision(Q))
        _, dkdv_kernel, dq_kernel = ft.KERNELS[Q.dtype]
        dq_kernel[lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), bh)](
            Q, K, V, O, dO, L, delta, dQ, *strides, *ft._strides(O), *rest, **flags
        )
        dkdv_kernel[lambda meta: (triton.cdiv(n_k, meta["BLOCK_K"]), bh)](
            Q, K, V, dO, L, delta, dK, dV, *strides, *rest, **flags
        )

    lib = torch.library.Library("lmperf", "FRAGMENT")
    lib.define(
        "tbwd(Tensor Q, Tensor K, Tensor V, Tensor O, Tensor dO, Tensor L, "
        "Tensor(a!) dQ, Tensor(b!) dK, Tensor(c!) dV, bool is_causal) -> ()"
    )
    lib.impl("tbwd", _portable_backward, "CUDA")
    torch.library.register_fake("lmperf::tbwd", lambda *a: None, lib=lib)

    def backward(ctx, dO):
        L, Q, K, V, O = ctx.saved_tensors  # noqa: E741
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        torch.ops.lmperf.tbwd(Q, K, V, O, dO, L, dQ, dK, dV, ctx.is_causal)
        return dQ, dK, dV, None

    ft.FlashAttentionTriton.backward = staticmethod(backward)

dev = torch.device("cuda")
cfg = dataclasses.replace(model_config("2.7B", 1024), num_layers=2)
torch.manual_seed(0)
m = TransformerLM(cfg, attention=get_attention("flash_triton"), device=dev)
for layer in m.modules():
    if isinstance(layer, Linear):
        layer.weight = torch.nn.Parameter(layer.weight.detach().bfloat16())
f = FusedNormsLM(m)
compile_blocks(f)
tok, tgt = random_batch(cfg.vocab_size, 4, 1024, dev)
for _ in range(2):
    m.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = fused_cross_entropy(f(tok), tgt)
    loss.backward()
grads = {n: p.grad.float().clone() for n, p in m.named_parameters() if p.grad is not None}
torch.save(grads, f"/tmp/grads_{variant}.pt")  # compare: max over parameters of |a - b| / |a|
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = fused_cross_entropy(f(tok), tgt)
    loss.backward()
    torch.cuda.synchronize()
print(variant, "loss", float(loss))
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=30))
