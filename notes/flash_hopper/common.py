"""What the variant benchmarks share: SDPA pinned to one backend, the passes they time and the
interleaved rounds they time them in, and the allocator that device-side tensor descriptors
(tl.make_tensor_descriptor) need for their scratch."""

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import sdpa_kernel
from triton.testing import do_bench


def sdpa(backend):
    """Causal attention on (batch, seq, d) or (batch, heads, seq, d) through SDPA pinned to `backend`
    (no fallback)."""

    def run(q, k, v):
        with sdpa_kernel(backend):
            if q.dim() == 4:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0]

    return run


def passes(attend, q, k, v):
    """The two passes timed of attend(q, k, v): the forward without autograd, and forward + backward."""

    def forward():
        with torch.no_grad():
            attend(q, k, v)

    def forward_backward():
        q.grad = k.grad = v.grad = None
        attend(q, k, v).sum().backward()

    return {"forward": forward, "forward_backward": forward_backward}


def rounds(steps: dict, n: int = 5) -> dict:
    """do_bench medians (ms) of every step once per round, A B C A B C ..., n rounds: a list per key."""
    times = {}
    for _ in range(n):
        for key, run in steps.items():
            times.setdefault(key, []).append(do_bench(run, warmup=25, rep=200, return_mode="median"))
    return times


def use_torch_allocator():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
