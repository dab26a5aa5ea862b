"""The CS336 "basics" Transformer LM: pre-norm blocks, RMSNorm, RoPE, SwiGLU, untied LM head, no biases.

Readable in one sitting, in the manner of nanoGPT's model.py. The attention kernel is a plain
function ``attention(q, k, v, is_causal) -> out`` on (batch, heads, seq, d_head) tensors, so the
naive, NVTX-annotated, SDPA and FlashAttention variants plug in without touching the model.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from lmperf.attention.naive import naive_attention

AttentionFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    context_length: int
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    rope_theta: float = 10_000.0
    rmsnorm_eps: float = 1e-5

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads


def _trunc_normal_(weight: torch.Tensor, std: float) -> torch.Tensor:
    return nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-3 * std, b=3 * std)


class Linear(nn.Module):
    """y = x W^T with W of shape (d_out, d_in), N(0, 2/(d_in+d_out)) truncated at 3 sigma, no bias.

    Computed with F.linear rather than einsum: the same single GEMM, without einsum's per-call
    equation parsing, which at 7 projections per layer makes small models launch-bound.
    """

    def __init__(self, d_in: int, d_out: int, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype))
        _trunc_normal_(self.weight, std=math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    """Token embedding, N(0, 1) truncated at 3."""

    def __init__(self, num_embeddings: int, d_model: int, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, d_model, device=device, dtype=dtype))
        _trunc_normal_(self.weight, std=1.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    """RMSNorm computed in float32 and cast back, so bf16 inputs keep full-precision statistics."""

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype)


class RotaryEmbedding(nn.Module):
    """RoPE on interleaved pairs (x0, x1), (x2, x3), ...; cos/sin tables are non-persistent buffers."""

    def __init__(self, d_head: int, max_seq_len: int, theta: float, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_head, 2, device=device, dtype=torch.float32) / d_head)
        angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Rotate (..., seq, d_head) by position; positions default to 0..seq-1 (a slice, no gather)."""
        if positions is None:
            cos, sin = self.cos[: x.shape[-2]], self.sin[: x.shape[-2]]
        else:
            cos, sin = self.cos[positions], self.sin[positions]
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        pairs = rearrange(x, "... (half two) -> ... half two", two=2)
        x0, x1 = pairs.unbind(-1)
        rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return rearrange(rotated, "... half two -> ... (half two)")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding, attention: AttentionFn, device=None, dtype=None):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.rope = rope
        self.attention = attention
        self.q_proj = Linear(cfg.d_model, cfg.d_model, device, dtype)
        self.k_proj = Linear(cfg.d_model, cfg.d_model, device, dtype)
        self.v_proj = Linear(cfg.d_model, cfg.d_model, device, dtype)
        self.output_proj = Linear(cfg.d_model, cfg.d_model, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        split = "batch seq (heads d) -> batch heads seq d"
        q, k, v = (rearrange(proj(x), split, heads=self.num_heads) for proj in (self.q_proj, self.k_proj, self.v_proj))
        q, k = self.rope(q), self.rope(k)
        out = self.attention(q, k, v, is_causal=True)
        return self.output_proj(rearrange(out, "batch heads seq d -> batch seq (heads d)"))


class SwiGLU(nn.Module):
    """W2 (SiLU(W1 x) * W3 x)."""

    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + ffn(norm(x))."""

    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding, attention: AttentionFn, device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(cfg.d_model, cfg.rmsnorm_eps, device, dtype)
        self.attn = CausalSelfAttention(cfg, rope, attention, device, dtype)
        self.ln2 = RMSNorm(cfg.d_model, cfg.rmsnorm_eps, device, dtype)
        self.ffn = SwiGLU(cfg.d_model, cfg.d_ff, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: AttentionFn | None = None, device=None, dtype=None):
        super().__init__()
        attention = attention or naive_attention
        self.cfg = cfg
        rope = RotaryEmbedding(cfg.d_head, cfg.context_length, cfg.rope_theta, device)
        self.token_embeddings = Embedding(cfg.vocab_size, cfg.d_model, device, dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(cfg, rope, attention, device, dtype) for _ in range(cfg.num_layers)
        )
        self.ln_final = RMSNorm(cfg.d_model, cfg.rmsnorm_eps, device, dtype)
        self.lm_head = Linear(cfg.d_model, cfg.vocab_size, device, dtype)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        """(batch, seq) token ids -> (batch, seq, vocab) logits."""
        x = self.token_embeddings(token_ids)
        for block in self.layers:
            x = block(x)
        return self.lm_head(self.ln_final(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matmul_parameters(cfg: ModelConfig) -> int:
    """Weights that take part in matrix products (all Linear layers incl. the LM head).

    The embedding is a lookup and the norm gains are elementwise, so neither costs matmul FLOPs.
    """
    per_block = 4 * cfg.d_model * cfg.d_model + 3 * cfg.d_model * cfg.d_ff
    return cfg.num_layers * per_block + cfg.d_model * cfg.vocab_size
