"""The GPU's SM clock and board power while a block of code runs, sampled by ``nvidia-smi``.

Why: under back-to-back GEMMs an H100 sits at its power limit and the driver lowers the SM clock
(notes/ladder-power.md). A step that drops memory-bound kernels can then run its GEMMs slower, so a
step time says little about a technique without the clock and power it ran at. ``nvidia-smi`` runs
in a process of its own: sampling costs the measured process nothing, and needs no NVML bindings.

    steps, held_s = hold(replay, device, seconds=5)  # first into the clock and power of steady work
    with sampled(nvidia_smi_id(device)) as gpu:
        ...  # the replays
    gpu.columns("replay_")  # {"replay_sm_clock_mhz": ..., "replay_power_w": ..., ...}
"""

import logging
import shutil
import statistics
import subprocess
import timeit
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from lmperf.measure.phases import phase
from lmperf.measure.timing import synchronize

QUERY = ("clocks.sm", "power.draw", "power.limit", "temperature.gpu", "clocks_event_reasons.active")
COLUMNS = ("sm_clock_mhz", "power_w", "power_limit_w", "temperature_c")  # QUERY's numeric fields, as rows name them
REASONS = "clock_event_reasons"  # the last field: a bit mask (0x4: software power cap; 0x20, 0x40: thermal)
INTERVAL_MS = 100
log = logging.getLogger(__name__)


def nvidia_smi_id(device: torch.device) -> str | None:
    """The GPU as ``nvidia-smi -i`` names it (its UUID, whatever CUDA_VISIBLE_DEVICES maps), or None."""
    if device.type != "cuda":
        return None
    return f"GPU-{torch.cuda.get_device_properties(device).uuid}"


SETTLE_WINDOW_S = 0.25  # a hold runs in windows of at least this long (and one step) ...
SETTLE_WINDOWS = 3  # ... until this many in a row have medians within
SETTLE_TOLERANCE = 0.005  # this fraction of each other: the clock has stopped moving
# The hold's rule as result columns, so a report states it from the rows.
SETTLE_RULE = {
    "settle_window_s": SETTLE_WINDOW_S,
    "settle_windows": SETTLE_WINDOWS,
    "settle_tolerance": SETTLE_TOLERANCE,
}


@phase("settle")
def hold(
    step: Callable[[], object], device: torch.device, seconds: float, until_steady: bool = True
) -> tuple[int, float]:
    """Run ``step`` back to back until its time per step stops moving, for at most ``seconds`` of wall
    time (at least once, and the step that crosses ``seconds`` runs to its end); return how many steps
    ran and for how long. With ``until_steady=False``, for the whole ``seconds``.

    Why: the GPU's clock and power follow the work of the last seconds, and nvidia-smi's power on
    Hopper is an average over about a second. Without a hold, a replay timed right after its capture
    is timed in the state the capture left. Holding each replay first measures every rung in the state
    its own work keeps, whatever ran before it (notes/ladder-power.md). A step far below the power
    limit is steady at once, so the hold ends when SETTLE_WINDOWS windows of SETTLE_WINDOW_S in a row
    agree within SETTLE_TOLERANCE, instead of spending every hold's full ``seconds``. So the shortest
    hold is SETTLE_WINDOWS windows; a step longer than a window is a window of its own.
    """
    start = timeit.default_timer()
    steps, medians, window = 0, [], []
    while True:
        begun = timeit.default_timer()
        step()
        synchronize(device)
        now = timeit.default_timer()
        steps += 1
        window.append(now - begun)
        if now - start >= seconds:
            log.info(f"held {steps} steps for {now - start:.2f} s: the most allowed")
            return steps, now - start
        if until_steady and sum(window) >= SETTLE_WINDOW_S:
            medians, window = [*medians[1 - SETTLE_WINDOWS :], statistics.median(window)], []
            if len(medians) == SETTLE_WINDOWS and max(medians) <= (1 + SETTLE_TOLERANCE) * min(medians):
                log.info(f"held {steps} steps for {now - start:.2f} s: steady")
                return steps, now - start


@dataclass
class Samples:
    """Median SM clock (MHz), power draw and limit (W) and temperature (°C) over the samples, and the
    clock-event reasons seen; ``reason`` when there are none."""

    rows: list[tuple[float, ...]] = field(default_factory=list)  # COLUMNS' values, then the reasons' mask
    reason: str = ""

    def parse(self, text: str) -> None:
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) != len(QUERY):  # a line cut short when the sampler was stopped
                continue
            try:
                self.rows.append((*(float(v) for v in fields[:-1]), int(fields[-1], 16)))
            except ValueError:  # "[N/A]"
                continue
        if not self.rows and not self.reason:
            said = text.strip().splitlines()[0] if text.strip() else f"none in the block (one every {INTERVAL_MS} ms)"
            self.reason = f"nvidia-smi gave no sample: {said}"

    def columns(self, prefix: str) -> dict:
        """Each numeric field's median, and every clock-event reason seen in any sample (OR of the masks)."""
        fields = list(zip(*self.rows)) or [[float("nan")]] * len(COLUMNS) + [[]]
        seen = 0
        for mask in fields[-1]:
            seen |= mask
        return {
            **{prefix + name: statistics.median(values) for name, values in zip(COLUMNS, fields[:-1], strict=True)},
            prefix + REASONS: hex(seen) if self.rows else "",
            prefix + "gpu_samples": len(self.rows),
            prefix + "gpu_note": self.reason,
        }


@contextmanager
def sampled(gpu: str | None):
    """Sample ``gpu`` (an ``nvidia-smi -i`` id) every INTERVAL_MS while the block runs."""
    samples = Samples()
    smi = shutil.which("nvidia-smi")
    if gpu is None or smi is None:
        samples.reason = "no GPU to sample" if gpu is None else "no nvidia-smi on PATH"
        yield samples
        return
    query = f"--query-gpu={','.join(QUERY)}"
    command = [smi, "-i", gpu, query, "--format=csv,noheader,nounits", "-lms", str(INTERVAL_MS)]
    sampler = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield samples
    finally:
        sampler.terminate()
        try:
            out, _ = sampler.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            sampler.kill()
            out, _ = sampler.communicate()
        samples.parse(out)
