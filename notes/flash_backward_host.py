# pinned: de167786ae87  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_attention._forward, _backward, _heads_view, _signature, _PLANS, _Backward
"""Where does the host time of our attention's backward go, piece by piece, beside SDPA's?

After the launch-path cuts a forward under ``no_grad`` costs ours 7-9 us more host time than SDPA's,
but a forward + backward 66-100 us more (notes/flash-launch.md, "Two cuts"). This times, at the
model's shapes, the model's call forward + backward and forward alone with grad, ours and SDPA's,
then the pieces of our backward one by one: the Python autograd node against a C++ one, the pass
(``_backward``), its plan, its launches and its allocations. Then cProfile of our forward +
backward, by own time.

Shapes: the model's (batch 4, 16 heads, d 64, bf16, causal), q and k contiguous, v a view of a
(batch, seq, heads, d) projection, at 128 and 1024 queries. Host microseconds per call: 50 calls
issued back to back without a sync, median of 15 rounds, the variants taking turns.

    PYTHONPATH=src:notes python notes/flash_backward_host.py > notes/logs/<date>-flash_backward_host.txt

Ran at: 3e05adb78e8d (NVIDIA H200, torch 2.11, Triton 3.6), this script uncommitted then,
    output: notes/logs/2026-11-29-flash_backward_host-3e05adb-h200.txt
Ran at: 3e05adb78e8d and de167786ae87 (a second NVIDIA H200), one process each,
    output: notes/logs/2026-11-29-flash_backward_host-3e05adb-h200-second.txt,
    notes/logs/2026-11-29-flash_backward_host-de16778-h200-second.txt
"""

import cProfile
import pstats
import statistics

import flash_host_timeline
import torch
from flash_launch_cuts import host_us

from lmperf.kernels import flash_attention as fa


class _NoOp(torch.autograd.Function):
    """The cheapest Python autograd node: what any autograd.Function costs, forward and backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


def pieces(batch, heads, seq, d):
    """Our backward's parts, called on the tensors one forward saved."""
    every = flash_host_timeline.variants(batch, heads, seq, d)
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    q, k = make(batch, heads, seq, d), make(batch, heads, seq, d)
    v = make(batch, seq, heads, d).transpose(1, 2)
    Q, K, V, out, L = fa._forward(q, k, v, True)
    O = fa._heads_view(out, Q)
    dO = make(batch, seq, heads * d).view(batch, seq, heads, d).transpose(1, 2)
    fa._backward(Q, K, V, O, L, dO, True)
    plan = next(p for key, p in fa._PLANS.items() if key[0] is fa._Backward and key[1] == fa._signature(Q))
    dQ, dK, dV = (torch.empty_like(x) for x in (Q, K, V))
    x = make(batch, heads, seq, d).requires_grad_()
    g = make(batch, heads, seq, d)
    table = {name: every[name] for name in ("sdpa, forward + backward", "ours, forward + backward")}
    table |= {
        "sdpa, forward with grad": every["sdpa, inputs need grad"],
        "ours, forward with grad": every["ours, inputs need grad"],
        "no-op Function, forward + backward": lambda: _NoOp.apply(x).backward(g),
        "C++ view, forward + backward": lambda: x.view_as(x).backward(g),
        "ours, _backward (key, plan, allocations, launches)": lambda: fa._backward(Q, K, V, O, L, dO, True),
        "ours, plan call (allocations, launches)": lambda: plan(Q, K, V, O, L, dO),
        "ours, plan launches (outputs given)": lambda: plan.launch(Q, K, V, O, dO, L, dQ, dK, dV),
        "three empty_like": lambda: (torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)),
        "key of the backward's plan": lambda: (
            fa._signature(Q), fa._signature(K), fa._signature(V), fa._signature(dO)
        ),  # fmt: skip
    }
    return table, plan.kernel


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for seq in (128, 1024):
        table, kernel = pieces(4, 16, seq, 64)
        for fn in table.values():
            for _ in range(10):
                fn()
        times = {name: [] for name in table}
        for _ in range(15):
            for name, fn in table.items():
                times[name].append(host_us(fn, 50))
        print(f"\nbatch 4 x heads 16 x seq {seq} x d 64 ({kernel} backward): host us per call, median of 15 rounds")
        for name, values in times.items():
            print(f"  {name:55s} {statistics.median(values):8.1f}  ({min(values):.1f}-{max(values):.1f})", flush=True)
        ours = table["ours, forward + backward"]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            ours()
        torch.cuda.synchronize()
        profiler.disable()
        print(f"\n  cProfile, 200 of ours, forward + backward, at seq {seq}: by own time")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
