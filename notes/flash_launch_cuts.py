"""Do the launch-path cuts pay? Host time of one call of our attention through the model's function,
at the model's shapes, before and after, beside SDPA's.

The cuts (notes/flash-launch.md, "Two cuts: no Function without a gradient, descriptors encoded
once"): where no gradient can flow the call skips the autograd.Function, and the Hopper kernels'
TMA descriptors are encoded once per address instead of at every launch. This script times the
model's call (``lmperf.attention.flash_triton_attention``) and SDPA in turns, round by round, in one
process; run it alternately from a tree before the cuts and one after, on one machine, so that the
before/after pairs are as close as two processes can be and each process pairs ours with SDPA.

Shapes: the model's (batch 4, 16 heads, d 64, bf16, causal), q and k contiguous, v a view of a
(batch, seq, heads, d) projection, at 128 and 1024 queries. Per variant: 50 calls issued back to
back without a sync, host microseconds per call, median of the rounds; and the wall time of one
synchronized call (GPU included), median of the rounds.

    PYTHONPATH=src python notes/flash_launch_cuts.py --label after --rounds 15 >> out.csv

Ran at: 3a8a7a910349 (NVIDIA H200, torch 2.11, Triton 3.6), the script as then (the same four calls
    written out in it), as after, against a tree of 2b557cf28f35 as before,
    output: notes/logs/2026-11-29-flash_launch_cuts-3a8a7a9-h200.csv
Ran at: de167786ae87 (NVIDIA H200), as after, against a tree of 3e05adb78e8d as before (tensors
    passed by address, notes/flash-launch.md), output: notes/logs/2026-11-29-flash_launch_cuts-de16778-h200.csv
"""

import argparse
import statistics
import time

import flash_host_timeline
import torch

# The model's call and SDPA's, from flash_host_timeline: name there -> name in this script's rows.
CALLS = {
    "sdpa, no_grad": "sdpa no_grad",
    "ours, no_grad": "ours no_grad",
    "sdpa, forward + backward": "sdpa forward+backward",
    "ours, forward + backward": "ours forward+backward",
}


def variants(batch, heads, seq, d):
    every = flash_host_timeline.variants(batch, heads, seq, d)
    return {name: every[there] for there, name in CALLS.items()}


def host_us(fn, calls) -> float:
    """Host microseconds per call: ``calls`` calls issued back to back, then one sync."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def wall_us(fn) -> float:
    """One call, synchronized: what a user timing it with a sync sees."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True, help="which tree: before or after")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--header", action="store_true")
    args = parser.parse_args()
    if args.header:
        print("label,device,seq,variant,host_us,wall_us,rounds")
    for seq in (128, 1024):
        table = variants(4, 16, seq, 64)
        for fn in table.values():
            for _ in range(10):
                fn()
        host, wall = {name: [] for name in table}, {name: [] for name in table}
        for _ in range(args.rounds):  # the variants take turns
            for name, fn in table.items():
                host[name].append(host_us(fn, args.calls))
                wall[name].append(statistics.median(wall_us(fn) for _ in range(5)))
        for name in table:
            print(
                f"{args.label},{torch.cuda.get_device_name()},{seq},{name},"
                f"{statistics.median(host[name]):.2f},{statistics.median(wall[name]):.2f},{args.rounds}",
                flush=True,
            )


if __name__ == "__main__":
    main()
