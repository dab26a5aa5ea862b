"""Scaled dot-product attention written out: the N x N score matrix lives in memory."""

import math

import torch
from einops import einsum


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax with the row maximum subtracted, so exp never overflows.

    The maximum is detached: softmax does not change when its inputs shift, so no gradient flows
    through it, and amax's backward (the gradient shared among the elements equal to the maximum) is
    not built. Under torch.compile in bf16, with a scale that bf16 does not hold exactly (1 / sqrt(80),
    the 2.7B model's heads), that backward made every query and key gradient NaN in the first step,
    most likely by finding no element equal to a maximum taken at another precision
    (notes/one-allocation.md, section 10).
    """
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True).detach())
    return exp / exp.sum(dim=dim, keepdim=True)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v for (..., seq, d) tensors; the causal mask hides future keys."""
    scores = einsum(q, k, "... q d, ... k d -> ... q k") / math.sqrt(q.shape[-1])
    if is_causal:
        n_q, n_k = scores.shape[-2:]
        future = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).triu(1 + n_k - n_q)
        scores = scores.masked_fill(future, float("-inf"))
    return einsum(softmax(scores), v, "... q k, ... k d -> ... q d")
