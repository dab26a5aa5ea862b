"""Naive attention with profiler ranges around its three stages, for profiling runs only."""

import math

import torch
from einops import einsum

from lmperf.attention.naive import softmax
from lmperf.ranges import profiled_range


def annotated_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """The same math as naive_attention, in ranges "attention scores", "softmax" and "final matmul"."""
    with profiled_range("attention scores"):
        scores = einsum(q, k, "... q d, ... k d -> ... q k") / math.sqrt(q.shape[-1])
        if is_causal:
            n_q, n_k = scores.shape[-2:]
            future = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).triu(1 + n_k - n_q)
            scores = scores.masked_fill(future, float("-inf"))
    with profiled_range("softmax"):
        weights = softmax(scores)
    with profiled_range("final matmul"):
        return einsum(weights, v, "... q k, ... k d -> ... q d")
