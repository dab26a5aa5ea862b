"""What the variant benchmarks share: SDPA pinned to one backend, the passes they time and the
interleaved rounds they time them in, our backward forced to one kind and graphed, the allocator
that device-side tensor descriptors (tl.make_tensor_descriptor) need for their scratch, the inputs
they time, and kernel modules made from edited source.

Ran at: with the scripts that import it; each of them names its commit.
"""

import importlib.util
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path

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


def model_qkv(batch: int, heads: int, seq: int, d: int = 64):
    """Random bf16 q, k, v in the model's layout: (batch, seq, heads, d) projections read as (batch,
    heads, seq, d), leaves that require grad; seeded by the shape."""
    g = torch.Generator(device="cuda").manual_seed(seq + heads)
    return tuple(
        torch.randn(batch, seq, heads, d, device="cuda", dtype=torch.bfloat16, generator=g)
        .transpose(1, 2)
        .detach()
        .requires_grad_()
        for _ in "qkv"
    )


def leaderboard_backward_inputs():
    """The leaderboard shape (16 x 1 x 16384 x 64, causal) ready for a backward alone: q, k, v, and
    our forward's O and logsumexp L, and a random dO."""
    from lmperf.kernels import flash_attention_gluon

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(16, 1, 16384, 64, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
    flash_attention_gluon.forward(q, k, v, o, L, True)
    return q, k, v, o, L, torch.randn_like(o)


@contextmanager
def backward_forced(hopper: bool):
    """Our FlashAttention with the five-product Hopper backward forced on (True) or off (False) for
    the plans made inside: plans are kept per input signature and read the size rule once, so they
    are made afresh here and dropped after. Capture a step inside to keep the kernels it chose."""
    from lmperf.kernels import flash_attention, flash_attention_gluon_backward

    rule = flash_attention_gluon_backward.pays
    flash_attention._PLANS.clear()
    flash_attention_gluon_backward.pays = lambda n, programs, d: hopper
    try:
        yield
    finally:
        flash_attention_gluon_backward.pays = rule
        flash_attention._PLANS.clear()


def graphed_forward_backward(attend, q, k, v, hopper: bool | None = None):
    """attend's forward + backward captured as a CUDA graph (its replay), after one call outside the
    capture to autotune and compile; ours with its backward forced to the kind hopper names (None:
    as it is, or not ours)."""
    from lmperf.measure.timing import capture_graph

    with backward_forced(hopper) if hopper is not None else nullcontext():
        attend(q, k, v).sum().backward()
        return capture_graph(passes(attend, q, k, v)["forward_backward"], torch.device("cuda"))


def kernel_module(source: str, name: str, *replacements):
    """A kernel module from source text with each (old, new) replaced, without its torch.library
    registration (so that it can sit beside the landed module)."""
    for old, new in replacements:
        assert old in source, old
        source = source.replace(old, new)
    source = source[: source.index("_LIBRARY = ")] + source[source.index("def compile_for_sm90") :]
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
