"""RMSNorm with the residual stream's add and gradient in one Triton pass each way.

Why: in the compiled 2.7B block (H100, ``report/reference/h100/ladder-top/``) inductor's RMSNorm
backward takes about 110 us a norm, where one pass over its bytes takes about 50: it reads x and
the output gradient twice, once for the input gradient (a row reduction) and again for the weight
gradient (a column reduction over all rows). Here the backward reads each once: a program walks a
band of rows, writes each row's input gradient and keeps its band's weight gradient in registers;
a last sum adds the bands.

Two functions, both on (..., d) tensors, both returning the residual stream as well as the norm,
so that the residual gradient joins the norm's in the same pass instead of a separate add:

- ``rmsnorm(x, weight)`` -> (x, norm(x)): the stream passes through (a view), the norm is new;
- ``add_rmsnorm(x, r, weight)`` -> (h, norm(h)) with h = x + r: the block's residual add.

The norm is the model's (``lmperf.model.transformer.RMSNorm``): float32 statistics, x / rms(x) *
weight, written in the autocast dtype where autocast is on (the cast the next Linear would make,
done in the same pass).

``FusedNormsLM`` runs a TransformerLM on these, on its own weights: each block takes and hands on
(stream, normed stream), so every residual add but the embedding's happens inside a norm.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# The backward's launch shape: PROGRAMS_PER_SM bands an SM, a program each, taking ROWS_PER_TILE
# rows an iteration. At the 2.7B model's shape (4096 x 2560, H100) 2 bands an SM and 4 rows took
# 70.3 us, 1 row in 4 bands an SM 73.9, a copy of the same bytes 60.7
# (notes/rmsnorm_backward_bench.py); fewer bands also leave fewer weight-gradient partials to sum.
PROGRAMS_PER_SM = 2
ROWS_PER_TILE = 4


@triton.jit
def _rmsnorm_forward(X, R, H, N, W, RSTD, n_cols, eps, HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x += tl.load(R + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(H + row * n_cols + cols, x, mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(N + row * n_cols + cols, (x * rstd * w).to(N.dtype.element_ty), mask=mask)
    tl.store(RSTD + row, rstd)


@triton.jit
def _rmsnorm_backward(
    DN,
    DH,
    H,
    W,
    RSTD,
    DX,
    DR,
    DW,
    n_rows,
    n_cols,
    rows_per_band,
    HAS_DH: tl.constexpr,
    HAS_DR: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """A band of rows, ROWS at a time as one tile, so that each program has several rows' loads in
    flight; the band's weight gradient stays in registers until its end."""
    band = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    in_row = cols < n_cols
    w = tl.load(W + cols, mask=in_row).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = band.to(tl.int64) * rows_per_band
    last = tl.minimum(first + rows_per_band, n_rows)
    for row0 in range(first, last, ROWS):
        rows = row0 + tl.arange(0, ROWS)
        mask = (rows[:, None] < last) & in_row[None, :]
        at = rows[:, None] * n_cols + cols[None, :]
        rstd = tl.load(RSTD + rows, mask=rows < last, other=0.0)[:, None]
        x_hat = tl.load(H + at, mask=mask, other=0.0).to(tl.float32) * rstd
        dn = tl.load(DN + at, mask=mask, other=0.0).to(tl.float32)
        dw += tl.sum(dn * x_hat, axis=0)
        dn_w = dn * w[None, :]
        dx = (dn_w - x_hat * (tl.sum(dn_w * x_hat, axis=1) / n_cols)[:, None]) * rstd
        if HAS_DH:
            dx += tl.load(DH + at, mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + at, dx, mask=mask)
        if HAS_DR:
            tl.store(DR + at, dx.to(DR.dtype.element_ty), mask=mask)
    tl.store(DW + band.to(tl.int64) * n_cols + cols, dw, mask=in_row)


def _launch_shape(n_cols: int) -> dict:
    block = triton.next_power_of_2(n_cols)
    return dict(BLOCK=block, num_warps=min(max(block // 256, 1), 16))


def _bands(n_rows: int, device: torch.device) -> int:
    if device.type != "cuda":
        return min(n_rows, 4)  # the interpreter: a few bands, so tests cross band edges
    return min(n_rows, PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, r, weight, eps, out_dtype):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        h = torch.empty_like(x) if r is not None else x
        n = torch.empty(x.shape, dtype=out_dtype, device=x.device)
        rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        r = r.contiguous() if r is not None else None
        _rmsnorm_forward[(n_rows,)](
            x, r, h, n, weight, rstd, n_cols, eps, HAS_RESIDUAL=r is not None, **_launch_shape(n_cols)
        )
        ctx.save_for_backward(h, weight, rstd)
        ctx.r_dtype = r.dtype if r is not None else None
        return (h if r is not None else x.view_as(x)), n

    @staticmethod
    def backward(ctx, dh, dn):
        h, weight, rstd = ctx.saved_tensors
        n_cols = h.shape[-1]
        n_rows = h.numel() // n_cols
        bands = _bands(n_rows, h.device)
        dx = torch.empty_like(h)
        dr = torch.empty(h.shape, dtype=ctx.r_dtype, device=h.device) if ctx.r_dtype is not None else None
        dw = torch.empty(bands, n_cols, dtype=torch.float32, device=h.device)
        _rmsnorm_backward[(bands,)](
            dn.contiguous(),
            dh.contiguous() if dh is not None else None,
            h,
            weight,
            rstd,
            dx,
            dr,
            dw,
            n_rows,
            n_cols,
            triton.cdiv(n_rows, bands),
            HAS_DH=dh is not None,
            HAS_DR=dr is not None,
            ROWS=ROWS_PER_TILE,
            **_launch_shape(n_cols),
        )
        return dx, dr, dw.sum(0).to(weight.dtype), None, None


def _out_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else x.dtype


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, RMSNorm(x)): x passes through, so its gradient meets the norm's in the backward's pass."""
    return _RMSNorm.apply(x, None, weight, eps, _out_dtype(x))


def add_rmsnorm(
    x: torch.Tensor, r: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, RMSNorm(h)) with h = x + r in x's dtype (float32 for the residual stream)."""
    return _RMSNorm.apply(x, r, weight, eps, _out_dtype(x))


class FusedNormsBlock(nn.Module):
    """A block that takes (x, ln1(x)) and gives (x', next_norm(x')): its adds are the norms'."""

    def __init__(self, block: nn.Module, next_norm: nn.Module):
        super().__init__()
        self.block, self.next_norm = block, next_norm

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ln2, after = self.block.ln2, self.next_norm
        x, h = add_rmsnorm(x, self.block.attn(h), ln2.weight, ln2.eps)
        return add_rmsnorm(x, self.block.ffn(h), after.weight, after.eps)


class FusedNormsLM(nn.Module):
    """``model``'s forward with the norms fused to the residual stream (same modules, same weights).

    Each block's ln1 is computed by the block before it, the first one's from the embedding, and
    the final norm by the last block. Its blocks are ``layers``, as the model's are, so that
    ``lmperf.training.compile_blocks`` compiles them the same way (one trace shared by all).
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        after = [b.ln1 for b in model.layers[1:]] + [model.ln_final]
        self.layers = nn.ModuleList(FusedNormsBlock(b, n) for b, n in zip(model.layers, after, strict=True))

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        first = self.model.layers[0].ln1
        x, h = rmsnorm(self.model.token_embeddings(token_ids), first.weight, first.eps)
        for block in self.layers:
            x, h = block(x, h)
        return self.model.lm_head(h)
