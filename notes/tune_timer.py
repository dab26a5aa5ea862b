# pinned: 2fe3bdb87f9f  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_attention._tune_bench, flash_attention._PLANS
"""Does the autotuner pick our FlashAttention's tiles by host noise at short lengths?

Question: at the flash sweep's short lengths, ours' replayed forward + backward differs by up to 1.5x
from one run to the next (notes/one-allocation.md, section 23), at d = 16 and 32 and in fp32, where
a kernel runs for a few microseconds. The autotuner times each config with ``do_bench``: one call at
a time between events, after an L2 flush. Where the host takes longer to launch a call than the GPU
takes to flush, the host's time lands in the events, and a config can win by the host's noise.
Timing each config as a replayed CUDA graph (no host between calls) would pick by the GPU's time.

For each case (dtype, head size, length; batch 1, causal, as the sweep runs it), in one process:
the autotuner's memory and our plans are cleared, the first forward + backward tunes with one timer,
and the replayed forward + backward of what it picked is timed (``lmperf.studies.flash.graphed_pass``,
20 rounds of 50 replays, the median). The two timers take turns, ``--tunings`` times each. Printed:
each tuning's picks (``lmperf.kernels.flash_attention.tiles``) and replayed time.

    python notes/tune_timer.py [--cases bf16:16:128,...] [--tunings 3]

Ran at: 70a4026 with this script uncommitted (NVIDIA H200), output: logs/2026-12-01-tune_timer-70a4026-h200.txt
"""

import argparse
import statistics

import torch
import triton.testing

from lmperf.kernels import flash_attention
from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.studies.flash import graphed_pass

CASES = ",".join(f"{t}:{d}:{n}" for t in ("bf16", "fp32") for d in (16, 32) for n in (128, 256, 512))


def replayed_bench(kernel_call, quantiles):
    """A config's time as replays of a CUDA graph of back-to-back calls: no host time between them."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        kernel_call()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(5):
            kernel_call()
        end.record()
        torch.cuda.synchronize()
        calls = max(1, min(100, int(1.0 / max(begin.elapsed_time(end) / 5, 1e-3))))
        graph = torch.cuda.CUDAGraph()  # captured without torch.cuda.graph's collection and cache release
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            for _ in range(calls):
                kernel_call()
        finally:
            graph.capture_end()
        times = []
        for _ in range(10):
            begin.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(begin.elapsed_time(end) / calls)
    deciles = statistics.quantiles(times, n=10)
    return [deciles[4], deciles[1], deciles[7]]  # the autotuner asks for the median, 20th and 80th percentiles


TIMERS = {"do_bench": None, "replayed": replayed_bench}  # None: the kernels' own (_tune_bench)


def tune_once(dtype, d: int, seq: int, timer) -> tuple[str, float]:
    """Fresh tuning with ``timer``, then the picks and the replayed forward + backward (ms)."""
    for kernel in flash_attention.KERNELS[dtype]:
        kernel.cache.clear()
        kernel._do_bench = timer or flash_attention._tune_bench
    flash_attention._PLANS.clear()
    flash_attention.RAN.clear()
    g = torch.Generator(device="cuda").manual_seed(seq)
    q, k, v = (torch.randn(1, seq, d, device="cuda", dtype=dtype, generator=g).requires_grad_() for _ in range(3))
    FlashAttentionTriton.apply(q, k, v, True).sum().backward()
    picks = flash_attention.tiles()
    replay = graphed_pass(FlashAttentionTriton.apply, q, k, v, True, "forward_backward")
    begin, end, times = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), []
    for _ in range(20):
        begin.record()
        for _ in range(50):
            replay()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) / 50)
    return picks, statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=CASES)
    p.add_argument("--tunings", type=int, default=3)
    args = p.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print("case | timer | tuning | replayed fwd+bwd (ms) | picks")
    for case in args.cases.split(","):
        name, d, seq = case.split(":")
        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[name]
        found = {timer: [] for timer in TIMERS}
        for tuning in range(args.tunings):
            order = list(TIMERS) if tuning % 2 == 0 else list(TIMERS)[::-1]
            for timer in order:
                picks, ms = tune_once(dtype, int(d), int(seq), TIMERS[timer])
                found[timer].append(ms)
                print(f"{case} | {timer} | {tuning} | {ms:.5f} | {picks}", flush=True)
        for timer, times in found.items():
            print(f"{case} | {timer} | all | {min(times):.5f}-{max(times):.5f} (median {statistics.median(times):.5f})")


if __name__ == "__main__":
    main()
