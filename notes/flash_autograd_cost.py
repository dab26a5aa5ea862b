# pinned: 6084ef569efd  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_attention._forward, _heads_view, _backward
"""What does autograd add to the host time of our forward, and which part of it?

notes/flash_host_timeline.py found our forward, launched with inputs that need grad, 72-102 us
dearer to the host than the same call on detached inputs, where SDPA's costs 2-6 us more
(notes/flash-launch.md, "One call's host timeline"). This times autograd.Functions that differ from
ours in one thing each, at the model's shape (batch 4, 16 heads, 128 queries, d 64, bf16, causal),
interleaved round by round, and then cProfile of our call with and without grad, by own time.

    PYTHONPATH=src python notes/flash_autograd_cost.py > notes/logs/<date>-flash_autograd_cost.txt

Ran at: 3a4be950d09d (NVIDIA H200, torch 2.11, Triton 3.6), whose src/ is the pinned commit's,
    output: notes/logs/2026-11-29-flash_autograd_cost-3a4be95-h200.txt
"""

import cProfile
import io
import pstats
import statistics
import time

import torch

from lmperf.kernels import flash_attention as fa
from lmperf.kernels.flash_attention import FlashAttentionTriton


class SavesOut(FlashAttentionTriton):
    """Ours, saving the merged output rather than its (batch, heads, seq, d) view."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False, merged_heads=False):
        Q, K, V, out, L = fa._forward(Q, K, V, is_causal)
        ctx.save_for_backward(L, Q, K, V, out)
        ctx.is_causal = is_causal
        return out

    @staticmethod
    def backward(ctx, dO):
        L, Q, K, V, out = ctx.saved_tensors
        batch, heads, n, d = Q.shape
        dO = dO.reshape(batch, n, heads, d).transpose(1, 2)
        return *fa._backward(Q, K, V, fa._heads_view(out, Q), L, dO, ctx.is_causal), None, None


class SavesNothing(SavesOut):
    """Ours, saving nothing (its backward cannot run: host time of the forward only)."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False, merged_heads=False):
        return fa._forward(Q, K, V, is_causal)[3]


class Empty(torch.autograd.Function):
    """No kernel: allocates our two outputs and saves what ours saves."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False, merged_heads=False):
        batch, heads, n, d = Q.shape
        out, L = Q.new_empty(batch, n, heads * d), Q.new_empty(Q.shape[:-1], dtype=torch.float32)
        ctx.save_for_backward(L, Q, K, V, out)
        return out

    @staticmethod
    def backward(ctx, dO):
        raise NotImplementedError


def host_us(fn, calls=50) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    batch, heads, seq, d = 4, 16, 128, 64
    q, k = (make(batch, heads, seq, d).requires_grad_() for _ in range(2))
    v = make(batch, seq, heads, d).requires_grad_().transpose(1, 2)
    qd, kd, vd = (x.detach() for x in (q, k, v))
    table = {
        "ours": lambda: FlashAttentionTriton.apply(q, k, v, True, True),
        "ours, detached inputs": lambda: FlashAttentionTriton.apply(qd, kd, vd, True, True),
        "_forward alone": lambda: fa._forward(qd, kd, vd, True),
        "saves the output, not a view": lambda: SavesOut.apply(q, k, v, True, True),
        "saves nothing": lambda: SavesNothing.apply(q, k, v, True, True),
        "no kernel (allocates, saves)": lambda: Empty.apply(q, k, v, True, True),
        "no kernel, detached inputs": lambda: Empty.apply(qd, kd, vd, True, True),
    }
    for fn in table.values():
        for _ in range(20):
            fn()
    rounds = {name: [] for name in table}
    for _ in range(30):  # interleaved: every variant once per round
        for name, fn in table.items():
            rounds[name].append(host_us(fn))
    print(f"batch {batch} x heads {heads} x seq {seq} x d {d}: host us per forward, 50 back to back, median of 30 rounds")
    for name, times in rounds.items():
        print(f"  {name:32s} {statistics.median(times):7.1f}  (quartiles {statistics.quantiles(times, n=4)[0]:.1f}"
              f"-{statistics.quantiles(times, n=4)[2]:.1f})")
    for name in ("ours", "ours, detached inputs"):
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            table[name]()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(14)
        print(f"\ncProfile of 2000 calls, {name}, by own time:\n{text.getvalue()}", flush=True)


if __name__ == "__main__":
    main()
