"""AdamW in one Triton pass per parameter: read p, g, m, v once, write p, m, v once.

lmperf's AdamW (``lmperf.model.optim``) spells the update as ~10 multi-tensor ops, each a full
pass over HBM: about 72 bytes per parameter. The update needs 28 (four fp32 reads, three writes),
so it is bandwidth-bound at 28 B/param and one fused pass reaches that bound. Same semantics (CS336
Assignment 1): per-parameter step count t on the device, bias correction folded into the step size,
decoupled weight decay applied after the Adam step. Same state (t, m, v), so the two optimizers
can take turns on one model.

Capturable: t is incremented on the device and read by the kernel, so a CUDA graph of the step
replays as any later step.

Master weights: a parameter stored in bf16 keeps an fp32 copy, ``state["master"]``, and fp32 m and
v. The kernel updates the master and writes its bf16 rounding to the parameter in the same pass.
The model then multiplies by bf16 weights directly: under autocast, the same products as casting
fp32 weights every step, without that cast (6 B/param in the forward) or the cast of the weight
gradient back to fp32 (6 B/param in the backward). Still 28 B/param here: the gradient is read in
bf16 (2 B, not 4) and the bf16 weight written (2 B).
"""

import math

import torch
import triton
import triton.language as tl

from lmperf.model.optim import AdamW

BLOCK = 2048  # elements per program: 8 KiB of each fp32 stream, 4 warps


@triton.jit
def _adamw_kernel(
    p_ptr,
    w_ptr,  # the fp32 master weights; p_ptr itself where the parameter is its own master
    g_ptr,
    m_ptr,
    v_ptr,
    t_ptr,
    n_elements,
    lr,
    beta1,
    beta2,
    log2_beta1,
    log2_beta2,
    eps,
    decay,
    HAS_MASTER: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    t = tl.load(t_ptr)
    g = tl.load(g_ptr + offsets, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offsets, mask=mask)
    v = tl.load(v_ptr + offsets, mask=mask)
    p = tl.load(w_ptr + offsets, mask=mask).to(tl.float32)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    # lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), with b^t = 2^(t log2 b)
    step_size = lr * tl.sqrt(1 - tl.exp2(t * log2_beta2)) / (1 - tl.exp2(t * log2_beta1))
    p = p - step_size * m / (tl.sqrt(v) + eps)
    p = p * decay
    tl.store(m_ptr + offsets, m, mask=mask)
    tl.store(v_ptr + offsets, v, mask=mask)
    tl.store(w_ptr + offsets, p.to(w_ptr.dtype.element_ty), mask=mask)
    if HAS_MASTER:  # round to nearest even on a GPU (Triton's interpreter truncates)
        tl.store(p_ptr + offsets, p.to(p_ptr.dtype.element_ty), mask=mask)


class FusedAdamW(AdamW):
    """lmperf's AdamW with the update in one Triton kernel per parameter: fp32 state, and fp32 master
    weights for a parameter stored in lower precision."""

    def new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        if p.dtype == torch.float32:
            return super().new_state(p)
        master = p.detach().float()
        t = torch.zeros((), device=p.device)
        return dict(t=t, m=torch.zeros_like(master), v=torch.zeros_like(master), master=master)

    def _update(self, params: list[torch.Tensor], group: dict) -> None:
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        state = [self.state[p] for p in params]
        torch._foreach_add_([s["t"] for s in state], 1)
        for p, s in zip(params, state):
            if not (p.is_contiguous() and p.grad.is_contiguous()):
                raise ValueError("FusedAdamW needs contiguous parameters and gradients")
            n = p.numel()
            _adamw_kernel[(triton.cdiv(n, BLOCK),)](
                p,
                s.get("master", p),
                p.grad,
                s["m"],
                s["v"],
                s["t"],
                n,
                lr,
                beta1,
                beta2,
                math.log2(beta1),
                math.log2(beta2),
                eps,
                1 - lr * weight_decay,
                HAS_MASTER="master" in s,
                BLOCK=BLOCK,
            )
