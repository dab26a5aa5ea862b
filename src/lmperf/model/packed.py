"""Q, K and V as one product, and W1 and W3 as another: one GEMM each where the model has three and two.

Why: in the 2.7B ladder's top rung (H100, ``report/reference/h100/ladder-top/``) the four
d_model x d_model forward projections ran at 567 TF/s, where the FFN's ran at 716. A 4096 x 2560
output is 320 tiles of 256 x 128 for 132 SMs, 2.4 waves, so the third wave runs 40% full; Q, K and V
as one 4096 x 7680 output are 7.3 waves. In the backward the input gradient, the sum of the three
(or two) projections' gradients, becomes one GEMM's longer K loop instead of a sum after three.

The weights stay the model's, one Parameter per projection, so each keeps its own AdamW state,
fp32 master weights and gradient hook (``lmperf.model.optim_in_backward``): ``packed_copies`` makes
the bf16 copies of a block's packed projections consecutive rows of one tensor, each Parameter a
view of its rows, and ``joined`` hands autograd that tensor whole. Its backward gives each
projection its rows of the one weight gradient: views, no copy.

``PackedLM`` is ``FusedNormsLM`` (``lmperf.model.fused_rmsnorm``) with its blocks' projections packed.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from lmperf.model.fused_rmsnorm import FusedNormsLM, add_rmsnorm
from lmperf.model.transformer import CausalSelfAttention, Linear, SwiGLU, TransformerBlock


def packed_groups(block: TransformerBlock) -> list[list[Linear]]:
    """The projections of ``block`` that are multiplied as one: [Q, K, V] and [W1, W3], in row order."""
    attn, ffn = block.attn, block.ffn
    return [[attn.q_proj, attn.k_proj, attn.v_proj], [ffn.w1, ffn.w3]]


def packed_copies(tensors: list[torch.Tensor], groups: list[list[int]], dtype: torch.dtype) -> list[nn.Parameter]:
    """Copies of ``tensors`` in ``dtype``, as Parameters; those of each group of indexes in ``groups``
    are consecutive rows of one tensor, so that ``joined`` can multiply by them as one."""
    copies: list[nn.Parameter | None] = [None] * len(tensors)
    for group in groups:
        rows = torch.cat([tensors[i].detach().to(dtype) for i in group]).split([tensors[i].shape[0] for i in group])
        for i, part in zip(group, rows, strict=True):
            copies[i] = nn.Parameter(part)
    return [copy if copy is not None else nn.Parameter(t.detach().to(dtype)) for copy, t in zip(copies, tensors)]


class _Joined(torch.autograd.Function):
    """The tensor whose consecutive rows ``parts`` are; its gradient goes back to them as row views."""

    @staticmethod
    def forward(ctx, *parts):
        ctx.rows = [p.shape[0] for p in parts]
        first = parts[0]
        shape = (sum(ctx.rows), *first.shape[1:])
        return first.new_empty(0).set_(first.untyped_storage(), first.storage_offset(), shape, first.stride())

    @staticmethod
    def backward(ctx, grad):
        return grad.split(ctx.rows)


def joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """``parts`` as one tensor, for autograd too; they must be consecutive rows of one storage
    (``packed_copies`` makes them so)."""
    offset = parts[0].storage_offset()
    for p in parts:
        if not p.is_contiguous() or p.untyped_storage().data_ptr() != parts[0].untyped_storage().data_ptr():
            raise ValueError("joined: the parts are not rows of one tensor; make them with packed_copies")
        if p.storage_offset() != offset:
            raise ValueError("joined: the parts are not consecutive rows of one tensor")
        offset += p.numel()
    return _Joined.apply(*parts)


def attention(attn: CausalSelfAttention, x: torch.Tensor, wqkv: torch.Tensor) -> torch.Tensor:
    """``CausalSelfAttention.forward`` with Q, K and V from one product by ``wqkv`` = [Wq; Wk; Wv]."""
    split = "batch seq (three heads d) -> three batch heads seq d"
    q, k, v = rearrange(F.linear(x, wqkv), split, three=3, heads=attn.num_heads)
    q, k = attn.rope(q), attn.rope(k)
    out = attn.attention(q, k, v, is_causal=True)
    return attn.output_proj(rearrange(out, "batch heads seq d -> batch seq (heads d)"))


def swiglu(ffn: SwiGLU, x: torch.Tensor, w13: torch.Tensor) -> torch.Tensor:
    """``SwiGLU.forward`` with W1 x and W3 x from one product by ``w13`` = [W1; W3]."""
    gate, up = F.linear(x, w13).chunk(2, dim=-1)
    return ffn.w2(gate * torch.sigmoid(gate) * up)


class PackedNormsBlock(nn.Module):
    """``FusedNormsBlock`` with the packed products: (x, ln1(x), [Wq; Wk; Wv], [W1; W3]) -> (x', next_norm(x'))."""

    def __init__(self, block: TransformerBlock, next_norm: nn.Module):
        super().__init__()
        self.block, self.next_norm = block, next_norm

    def forward(self, x: torch.Tensor, h: torch.Tensor, wqkv: torch.Tensor, w13: torch.Tensor):
        ln2, after = self.block.ln2, self.next_norm
        x, h = add_rmsnorm(x, attention(self.block.attn, h, wqkv), ln2.weight, ln2.eps)
        return add_rmsnorm(x, swiglu(self.block.ffn, h, w13), after.weight, after.eps)


class PackedLM(FusedNormsLM):
    """``FusedNormsLM`` whose blocks multiply by their packed projections: the model's own weights,
    which must be ``packed_copies`` (the ladder's bf16 copies are). Joining happens outside the
    blocks, so a compiled block sees each packed weight as an input."""

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.layers = nn.ModuleList(PackedNormsBlock(b.block, b.next_norm) for b in self.layers)

    def block_inputs(self, block: TransformerBlock) -> tuple[torch.Tensor, ...]:
        return tuple(joined([linear.weight for linear in group]) for group in packed_groups(block))
