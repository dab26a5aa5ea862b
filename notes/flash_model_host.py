# pinned: 70d6058e3731  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_attention._forward, _signature, _outputs, _heads_view, _PLANS, _Forward
"""Host time of one attention call in the model, launched: ours against SDPA, and ours piece by piece.

The e2e rows with our attention, launched, are host-bound at small and medium, and a few microseconds
a call over 12-24 layers decide them (notes/flash-launch.md, "In the model, launched"). This times
what one layer's attention costs the host, with the tensors as the model makes them: q and k
contiguous (batch, heads, seq, d) from RoPE, v a (batch, seq, heads, d) projection seen as (batch,
heads, seq, d), and the output merged back to (batch, seq, heads x d) for the output projection,
whose gradient comes back contiguous. bf16, causal.

    PYTHONPATH=src python notes/flash_model_host.py [--out DIR]

Ran at: 568aa77baf3b (NVIDIA H200, torch 2.11, Triton 3.6), this script uncommitted then,
    output: notes/logs/2026-11-29-flash_model_host-568aa77-h200.txt

Per piece: host microseconds per call, 50 calls issued back to back without a sync, median of 15
such rounds (a sync between rounds). Then cProfile of 200 of our forward + backward calls.
"""

import argparse
import cProfile
import io
import pstats
import statistics
import time
from pathlib import Path

import torch

from lmperf.attention import flash_triton_attention, sdpa_attention
from lmperf.kernels import flash_attention as fa

SHAPES = {"small": (4, 12, 64), "medium": (4, 16, 64)}  # batch, heads, d: the e2e batch of 4
SEQS = (128, 512, 1024)


def host_us(fn, calls=50, rounds=15) -> float:
    for _ in range(10):
        fn()
    per_call = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per_call)


class Identity(torch.autograd.Function):
    """The floor for any Python autograd.Function: saves its input, returns it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dx):
        return dx


def tensors(batch, heads, seq, d):
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    q, k = (make(batch, heads, seq, d).requires_grad_() for _ in range(2))
    v_leaf = make(batch, seq, heads, d).requires_grad_()
    return q, k, v_leaf, make(batch, seq, heads * d)


def pieces(batch, heads, seq, d) -> dict:
    q, k, v_leaf, dy = tensors(batch, heads, seq, d)

    def merged(attention):
        def call():
            v = v_leaf.transpose(1, 2)
            out = attention(q, k, v, is_causal=True)
            return out.transpose(1, 2).reshape(batch, seq, heads * d)

        return call

    ours, sdpa = merged(flash_triton_attention), merged(sdpa_attention)

    def both(call):
        def step():
            call().backward(dy)

        return step

    qd, kd, vd = q.detach(), k.detach(), v_leaf.detach().transpose(1, 2)
    key = (fa._Forward, fa._signature(qd), fa._signature(kd), fa._signature(vd), True)
    ours()  # makes the plans
    both(ours)()
    plan = fa._PLANS[key]
    out, L = fa._outputs(qd)
    o = fa._heads_view(out, qd)
    x = q.detach().clone().requires_grad_()
    return {
        "sdpa forward": sdpa,
        "ours forward": ours,
        "sdpa forward + backward": both(sdpa),
        "ours forward + backward": both(ours),
        "Identity.apply (autograd.Function floor)": lambda: Identity.apply(x),
        "Identity forward + backward": lambda: Identity.apply(x).backward(q.detach()),
        "_forward (no autograd)": lambda: fa._forward(qd, kd, vd, True),
        "3 x _signature + key": lambda: (fa._Forward, fa._signature(qd), fa._signature(kd), fa._signature(vd), True),
        "_outputs (2 allocations)": lambda: fa._outputs(qd),
        "_heads_view": lambda: fa._heads_view(out, qd),
        "plan.launch (kernel launch alone)": lambda: plan.launch(qd, kd, vd, o, L),
        "empty_like x 3": lambda: (torch.empty_like(qd), torch.empty_like(kd), torch.empty_like(qd)),
    }, both(ours)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    args = p.parse_args()
    lines = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}"]
    for size, (batch, heads, d) in SHAPES.items():
        for seq in SEQS:
            table, ours_step = pieces(batch, heads, seq, d)
            lines.append(f"\n{size}: batch {batch} x heads {heads} x seq {seq} x d {d}, kernels {fa.ran()}")
            for name, fn in table.items():
                lines.append(f"  {name:45s} {host_us(fn):8.1f} us")
            print("\n".join(lines[-len(table) - 1 :]), flush=True)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(200):
        ours_step()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
    lines.append(f"\ncProfile of 200 of our forward + backward calls (the last shape), by own time:\n{text.getvalue()}")
    print(lines[-1])
    Path(args.out, "flash_model_host.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
