"""One replay's time and energy, measured in the state its own work holds the GPU in.

Ran at: with the scripts that import it; each of them names its commit.

Shared by the energy scripts in notes/ (run as `python notes/<script>.py`, so this directory is
on the path). The work is held back to back for ``hold_s`` untimed (``lmperf.measure.power.hold``
says why), then run about ``timed_s`` more, each run between CUDA events, with NVML's energy
counter read around the timed runs and, given ``gpu``, nvidia-smi sampling clock and power
meanwhile. ``captured`` makes an arm a CUDA graph's replay; ``in_turns`` times arms in turns.
"""

import contextlib
import functools
import statistics
from typing import NamedTuple

import torch

from lmperf.measure.power import Samples, hold, sampled


@functools.cache
def _energy_counter(device: torch.device):
    """The board's energy counter in joules, or NaN where pynvml or the counter is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as error:  # noqa: BLE001 - no pynvml or no counter: times (and samples) alone
        print(f"# no energy counter: {error}", flush=True)
        return lambda: float("nan")
    return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3


class Timed(NamedTuple):
    runs: int
    median_ms: float
    joules_per_run: float  # the energy counter's difference over the timed runs, per run
    clocks: Samples | None  # nvidia-smi's samples over the timed runs, where a gpu was given


def held_and_timed(run, device: torch.device, hold_s: float, timed_s: float, min_runs: int, gpu=None) -> Timed:
    """``run`` held for ``hold_s``, then timed over max(min_runs, the runs of about ``timed_s``)."""
    energy_j = _energy_counter(device)
    steps, held_s, _ = hold(run, device, hold_s, until_steady=False)
    n = max(min_runs, round(steps / held_s * timed_s))
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    with sampled(gpu) if gpu is not None else contextlib.nullcontext() as clocks:
        before = energy_j()
        events[0].record()
        for e in events[1:]:
            run()
            e.record()
        torch.cuda.synchronize()
        after = energy_j()
    ms = statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:]))
    return Timed(n, ms, (after - before) / n, clocks)


def captured(work, capture_error_mode: str = "global"):
    """The replay of a CUDA graph of ``work``, run twice on a side stream first (allocations and
    lazy initialisation happen outside the capture)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(2):
            work()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=capture_error_mode):
        work()
    return graph.replay


def in_turns(arms: dict, device: torch.device, rounds: int, hold_s: float, timed_s: float, flops=None, label=()):
    """Each arm held and timed in turn, ``rounds`` times, printing a line an arm and round:
    ``*label`` round arm replays median_ms [tflops, given flops a replay] j_per_replay."""
    for r in range(rounds):
        for name, replay in arms.items():
            timed = held_and_timed(replay, device, hold_s, timed_s, 10)
            rate = [] if flops is None else [f"{flops / timed.median_ms / 1e9:.0f}"]
            print(
                *label, r, name, timed.runs, f"{timed.median_ms:.3f}", *rate, f"{timed.joules_per_run:.3f}", flush=True
            )
