"""Attention kernels with one signature, attention(q, k, v, is_causal) -> out, so the model can swap them."""

from lmperf.attention.naive import naive_attention, softmax

ATTENTION = {"naive": naive_attention}


def get_attention(name: str):
    if name not in ATTENTION:
        raise KeyError(f"unknown attention {name!r}; known: {', '.join(ATTENTION)}")
    return ATTENTION[name]


__all__ = ["ATTENTION", "get_attention", "naive_attention", "softmax"]
