"""Where does the host time of one launched call of our attention go, call by call?

Timed piece by piece, our forward's plan and launch (26-42 us), the autograd.Function floor (7-11 us)
and the output views do not add up to what one forward costs the host in the model (31-104 us more
than SDPA's; notes/flash-launch.md, "In the model, one call piece by piece"). This times the same
call in the ways autograd can see it, and forward + backward, then records torch.profiler's host
timeline of single calls, ours and SDPA's, so that the time between the ops shows too (the backward's
ops on the autograd engine's thread included).

Shapes: the model's (batch 4, 16 heads, d 64, bf16, causal), q and k contiguous, v a view of a
(batch, seq, heads, d) projection, at 128 and 1024 queries.

    PYTHONPATH=src python notes/flash_host_timeline.py > notes/logs/<date>-flash_host_timeline.txt

Ran at: 22b14b2e7c6a (NVIDIA H200, torch 2.11, Triton 3.6), the script as then (forward rows only),
    before our forward stopped saving a view of its output (a417b2997d87),
    output: notes/logs/2026-11-29-flash_host_timeline-22b14b2-h200.txt
Ran at: a417b2997d87 (NVIDIA H200, torch 2.11, Triton 3.6),
    output: notes/logs/2026-11-29-flash_host_timeline-a417b29-h200.txt
"""

import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from lmperf.attention import flash_triton_attention, sdpa_attention
from lmperf.kernels.flash_attention import FlashAttentionTriton


def host_us(fn, calls=50, rounds=15) -> float:
    """Host microseconds per call: calls issued back to back without a sync, median of rounds."""
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


def variants(batch, heads, seq, d):
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    q, k = (make(batch, heads, seq, d).requires_grad_() for _ in range(2))
    v = make(batch, seq, heads, d).requires_grad_().transpose(1, 2)
    qd, kd, vd = (x.detach() for x in (q, k, v))
    apply = FlashAttentionTriton.apply

    def no_grad(fn):
        def call():
            with torch.no_grad():
                return fn()

        return call

    dy = make(batch, seq, heads * d)

    def forward_backward(attention):  # the output merged for the output projection, as in the model
        def call():
            out = attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, seq, heads * d)
            out.backward(dy)

        return call

    return {
        "sdpa, forward + backward": forward_backward(sdpa_attention),
        "ours, forward + backward": forward_backward(flash_triton_attention),
        "sdpa, inputs need grad": lambda: sdpa_attention(q, k, v, is_causal=True),
        "sdpa, no_grad": no_grad(lambda: sdpa_attention(q, k, v, is_causal=True)),
        "ours, inputs need grad": lambda: flash_triton_attention(q, k, v, is_causal=True),
        "ours, no_grad": no_grad(lambda: flash_triton_attention(q, k, v, is_causal=True)),
        "ours .apply, inputs need grad": lambda: apply(q, k, v, True, True),
        "ours .apply, detached inputs": lambda: apply(qd, kd, vd, True, True),
        "ours .apply, need grad, kept 1 call": _kept(lambda: apply(q, k, v, True, True)),
    }


def _kept(fn):
    """The call's output kept until the next call returns, as a model keeps it for the backward:
    the previous call's graph and saved tensors are then freed after the new call, not inside it."""
    held = []

    def call():
        held.append(fn())
        if len(held) > 1:
            held.pop(0)

    return call


def timeline(fn, label, calls=3):
    """torch.profiler's host events of the last of ``calls`` calls, in order, with their start and
    own time in microseconds, relative to the call's first event."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(calls):
            with torch.profiler.record_function(f"call {i}"):
                fn()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    last = next(e for e in events if e.name == f"call {calls - 1}")
    inside = [e for e in events if last.time_range.start <= e.time_range.start <= last.time_range.end]
    lines = [f"  {label}: one call, {last.cpu_time_total:.1f} us under the profiler"]
    for e in inside[1:]:
        depth, parent = 0, e.cpu_parent
        while parent is not None and parent is not last:
            depth, parent = depth + 1, parent.cpu_parent
        lines.append(
            f"    {e.time_range.start - last.time_range.start:7.1f} {'  ' * depth}{e.name[:60]:<60} "
            f"total {e.cpu_time_total:6.1f} own {e.self_cpu_time_total:6.1f}"
        )
    return lines


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for seq in (128, 1024):
        table = variants(4, 16, seq, 64)
        print(f"\nbatch 4 x heads 16 x seq {seq} x d 64: host us per call (50 back to back, median of 15)")
        for name, fn in table.items():
            print(f"  {name:40s} {host_us(fn):8.1f}", flush=True)
        for name in ("ours, inputs need grad", "sdpa, inputs need grad", "ours, forward + backward", "sdpa, forward + backward"):
            print("\n".join(timeline(table[name], name)), flush=True)


if __name__ == "__main__":
    main()
