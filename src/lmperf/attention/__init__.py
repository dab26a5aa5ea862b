"""The attention variants of the model, with one signature, attention(q, k, v, is_causal) -> out on
(batch, heads, seq, d), so the model can swap them. FlashAttention's own interface is (batch, seq, d):
heads fold into batch. Our FlashAttention kernels live in lmperf.kernels; rows name the kernels a
variant ran (``attention_kernel``).
"""

import sys

import torch.nn.functional as F

from lmperf import grid
from lmperf.attention.annotated import annotated_attention
from lmperf.attention.naive import naive_attention, softmax
from lmperf.kernels.flash_attention_pytorch import FlashAttentionPyTorch


def _fold_heads(function):
    """Adapt a (batch, seq, d) attention.Function to the model's (batch, heads, seq, d) tensors."""

    def attention(q, k, v, is_causal=False):
        b, h, t, d = q.shape
        out = function().apply(*(x.reshape(b * h, x.shape[-2], d) for x in (q, k, v)), is_causal)
        return out.view(b, h, t, d)

    return attention


def _triton_function():
    from lmperf.kernels.flash_attention import FlashAttentionTriton  # imports triton: only when used

    return FlashAttentionTriton


def flash_triton_attention(q, k, v, is_causal=False):
    """Our Triton kernels take the heads axis themselves, at the model's strides: no copies. The
    output comes back with its heads merged, as the output projection reads it, and is viewed as
    (batch, heads, seq, d) here: its gradient then needs no copy either (FlashAttentionTriton).
    Where no gradient can flow, no autograd.Function either (``flash_attention.flash_attention``)."""
    from lmperf.kernels.flash_attention import flash_attention  # imports triton: only when used

    batch, heads, seq, d = q.shape
    out = flash_attention(q, k, v, is_causal, True)
    return out.view(batch, seq, heads, d).transpose(1, 2)


def sdpa_attention(q, k, v, is_causal=False):
    """torch's scaled_dot_product_attention, free to pick its fastest backend."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


ATTENTION = {
    "naive": naive_attention,
    "annotated": annotated_attention,
    "flash_triton": flash_triton_attention,
    "flash_pytorch": _fold_heads(lambda: FlashAttentionPyTorch),
    "sdpa": sdpa_attention,
}
if tuple(ATTENTION) != grid.ATTENTIONS:  # the variants a grid may name, each with its implementation
    raise ImportError(
        f"lmperf.attention.ATTENTION names {list(ATTENTION)}, lmperf.grid.ATTENTIONS {list(grid.ATTENTIONS)}"
    )


def get_attention(name: str):
    if name not in ATTENTION:
        raise KeyError(f"unknown attention {name!r}; known: {', '.join(ATTENTION)}")
    return ATTENTION[name]


def forget_kernels() -> None:
    """Start a measurement whose rows name the kernels that ran (``attention_kernel``)."""
    flash = sys.modules.get("lmperf.kernels.flash_attention")  # not imported yet: none of its kernels ran
    if flash is not None:
        flash.RAN.clear()


def attention_kernel(name: str) -> str:
    """The kernels attention variant ``name`` ran, for a row's ``attention_kernel``: for flash_triton,
    what its passes ran since ``forget_kernels()``: 'triton', 'gluon' (Hopper), or per pass ('gluon
    forward, triton backward'), '' if it did not run; 'sdpa' for sdpa, whose backend torch picks;
    'pytorch' for the variants written in torch ops (compiled by inductor where the row is)."""
    if name == "flash_triton":
        from lmperf.kernels.flash_attention import ran

        return ran()
    return "sdpa" if name == "sdpa" else "pytorch"


def attention_tiles(name: str) -> str:
    """For flash_triton, the tiles, warps and stages the autotuner picked for the portable kernels its
    passes ran since ``forget_kernels()`` (lmperf.kernels.flash_attention.tiles); '' for the others."""
    if name == "flash_triton":
        from lmperf.kernels.flash_attention import tiles

        return tiles()
    return ""


def __getattr__(name):
    if name == "FlashAttentionTriton":
        return _triton_function()
    raise AttributeError(name)


__all__ = [
    "ATTENTION",
    "FlashAttentionPyTorch",
    "FlashAttentionTriton",
    "annotated_attention",
    "attention_kernel",
    "attention_tiles",
    "forget_kernels",
    "get_attention",
    "naive_attention",
    "sdpa_attention",
    "softmax",
]
