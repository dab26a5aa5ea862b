"""Attention kernels with one signature, attention(q, k, v, is_causal) -> out, so the model can swap them."""

from lmperf.attention.flash_pytorch import FlashAttentionPyTorch
from lmperf.attention.naive import naive_attention, softmax

ATTENTION = {"naive": naive_attention}


def get_attention(name: str):
    if name not in ATTENTION:
        raise KeyError(f"unknown attention {name!r}; known: {', '.join(ATTENTION)}")
    return ATTENTION[name]




def __getattr__(name):
    """FlashAttentionTriton imports triton, so it loads on first use only."""
    if name == "FlashAttentionTriton":
        from lmperf.attention.flash_triton import FlashAttentionTriton

        return FlashAttentionTriton
    raise AttributeError(name)


__all__ = ["ATTENTION", "FlashAttentionPyTorch", "FlashAttentionTriton", "get_attention", "naive_attention", "softmax"]
