"""What the variant benchmarks share: SDPA pinned to one backend, and the allocator that
device-side tensor descriptors (tl.make_tensor_descriptor) need for their scratch."""

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import sdpa_kernel


def sdpa(backend):
    """Causal attention on (batch, seq, d) through SDPA pinned to `backend` (no fallback)."""

    def run(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0]

    return run


def use_torch_allocator():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
