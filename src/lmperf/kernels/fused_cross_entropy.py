"""Cross-entropy in one Triton pass over the logits each way.

Why: the loss (``lmperf.model.loss.cross_entropy``) stays eager in every compiled rung, and spelled
out in torch ops it is about a dozen kernels over the (tokens, vocab) logits, each a full pass in
fp32: in the 2.7B ladder's top rung (H100, ``report/reference/h100/ladder-top/``) the eager tail of
the step took about 2.8 ms, where one read of the bf16 logits forward and a read and a write
backward take about 0.1. On an H100 held at its 700 W cap, memory-bound time removed is time
saved (``notes/ladder-power.md``).

Same loss: the mean over positions of logsumexp(logits) - logits[target], in fp32 from logits of
any float dtype. The forward keeps each row's logsumexp; the backward writes
(softmax - onehot(target)) * dloss / rows in the logits' dtype, the gradient the eager cast back
to bf16 hands the LM head.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _forward(X, T, LOSS, LSE, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    top = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), tl.float32)
    for start in range(0, n_cols, BLOCK):  # online logsumexp: running max and the sum scaled to it
        x = tl.load(X + row * n_cols + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        new_top = tl.maximum(top, tl.max(x, axis=0))
        total = total * tl.exp(top - new_top) + tl.sum(tl.exp(x - new_top), axis=0)
        top = new_top
    lse = top + tl.log(total)
    target = tl.load(T + row)
    tl.store(LSE + row, lse)
    tl.store(LOSS + row, lse - tl.load(X + row * n_cols + target).to(tl.float32))


@triton.jit
def _backward(X, T, LSE, DLOSS, DX, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    lse = tl.load(LSE + row)
    target = tl.load(T + row)
    g = tl.load(DLOSS).to(tl.float32) * scale
    for start in range(0, n_cols, BLOCK):
        at = start + cols
        x = tl.load(X + row * n_cols + at, mask=at < n_cols, other=0.0).to(tl.float32)
        dx = (tl.exp(x - lse) - (at == target).to(tl.float32)) * g
        tl.store(DX + row * n_cols + at, dx.to(DX.dtype.element_ty), mask=at < n_cols)


def _launch_shape(n_cols: int) -> dict:
    """Columns a program reads at a time, and its warps: a 10,000-word row in three chunks (the
    interpreter's tests cross chunk edges with a longer vocabulary than one chunk)."""
    block = min(triton.next_power_of_2(n_cols), 4096)
    return dict(BLOCK=block, num_warps=8 if block >= 2048 else 4)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets):
        x = logits.reshape(-1, logits.shape[-1]).contiguous()
        t = targets.reshape(-1).contiguous()
        rows, n_cols = x.shape
        loss = torch.empty(rows, dtype=torch.float32, device=x.device)
        lse = torch.empty(rows, dtype=torch.float32, device=x.device)
        _forward[(rows,)](x, t, loss, lse, n_cols, **_launch_shape(n_cols))
        ctx.save_for_backward(x, t, lse)
        ctx.shape = logits.shape
        return loss.mean()

    @staticmethod
    def backward(ctx, dloss):
        x, t, lse = ctx.saved_tensors
        rows, n_cols = x.shape
        dx = torch.empty_like(x)
        _backward[(rows,)](x, t, lse, dloss.contiguous(), dx, n_cols, 1.0 / rows, **_launch_shape(n_cols))
        return dx.view(ctx.shape), None


def fused_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``lmperf.model.loss.cross_entropy``: (..., vocab) logits and (...) target ids -> the mean loss (fp32)."""
    return _CrossEntropy.apply(logits, targets)
