"""The GPU's SM clock and board power while a block of code runs, sampled by ``nvidia-smi``.

Why: under back-to-back GEMMs an H100 sits at its power limit and the driver lowers the SM clock
(notes/ladder-power.md). A step that drops memory-bound kernels can then run its GEMMs slower, so a
step time says little about a technique without the clock and power it ran at. ``nvidia-smi`` runs
in a process of its own: sampling costs the measured process nothing, and needs no NVML bindings.

    held = hold(replay, device, seconds=5)  # first into the clock and power of steady work
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
from typing import NamedTuple

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
# ... or, sooner, until PROBE_S of samples of its work (instantaneous power, one every PROBE_INTERVAL_MS)
# all stay below FAR_BELOW of the power limit, at the top SM clock, with no clock-event reason but idle:
# there the power limit has nothing to lower, so the step already runs in the state its work keeps.
# Those first samples can read low (a large train step at context 1024 read under 80% of the limit,
# then was timed at the power cap; its other turn drew 645 W): a block timed after such a hold is
# checked against the power sampled while it was timed (``Samples.nearer_the_limit``), and held by
# the windows and timed again if so.
PROBE = ("power.draw.instant", "power.limit", "clocks.sm", "clocks.max.sm", "clocks_event_reasons.active")
PROBE_S = 0.15
PROBE_INTERVAL_MS = 20
FAR_BELOW = 0.75
IDLE = 0x1  # the one clock-event reason that lowers nothing (0x4 is the power cap, 0x20 and 0x40 thermal)
# The hold's rule as result columns, so a report states it from the rows.
SETTLE_RULE = {
    "settle_window_s": SETTLE_WINDOW_S,
    "settle_windows": SETTLE_WINDOWS,
    "settle_tolerance": SETTLE_TOLERANCE,
    "settle_far_below": FAR_BELOW,
}


class Held(NamedTuple):
    """What a hold ran: its steps and seconds, and whether a probe ended it (the work far below the
    power limit) rather than the steady windows or the time allowed."""

    steps: int
    seconds: float
    far_below: bool = False


@phase("settle")
def hold(
    step: Callable[[], object],
    device: torch.device,
    seconds: float,
    until_steady: bool = True,
    gpu: str | None = None,
) -> Held:
    """Run ``step`` back to back until its time per step stops moving, for at most ``seconds`` of wall
    time (at least once, and the step that crosses ``seconds`` runs to its end); return how many steps
    ran, for how long, and whether a probe ended it (``Held``). With ``until_steady=False``, for the
    whole ``seconds``.

    Why: the GPU's clock and power follow the work of the last seconds, and nvidia-smi's power on
    Hopper is an average over about a second. Without a hold, a replay timed right after its capture
    is timed in the state the capture left. Holding each replay first measures every rung in the state
    its own work keeps, whatever ran before it (notes/ladder-power.md). A step far below the power
    limit is steady at once, so the hold ends when SETTLE_WINDOWS windows of SETTLE_WINDOW_S in a row
    agree within SETTLE_TOLERANCE, instead of spending every hold's full ``seconds``. So the shortest
    hold is SETTLE_WINDOWS windows; a step longer than a window is a window of its own.

    With ``gpu`` (an ``nvidia-smi -i`` id), the hold ends sooner where a ``Probe`` of the step's work
    finds it far below the power limit: the instantaneous power, not the one-second average, so the
    reading is of this step's work and not of the block before it. Such a hold is ``far_below``, and
    the caller checks the power it then times the step at (``lmperf.measure.turns.timed_block``).
    """
    start = timeit.default_timer()
    steps, medians, window, probe = 0, [], [], None

    def ended(why: str, far_below: bool = False) -> Held:
        """The hold's end, logged with why it ended and, where the windows or the time ended it, what
        the probe read."""
        said = f" ({probe.said()})" if probe is not None and not far_below else ""
        log.info(f"held {steps} steps for {now - start:.2f} s: {why}{said}")
        return Held(steps, now - start, far_below)

    try:
        while True:
            begun = timeit.default_timer()
            step()
            synchronize(device)
            now = timeit.default_timer()
            steps += 1
            window.append(now - begun)
            if now - start >= seconds:
                return ended("the most allowed")
            if until_steady and gpu is not None:
                if probe is None:
                    probe = Probe(gpu)  # started after the first step, so that it samples only this work
                elif probe.far_below():
                    return ended("far below the power limit", far_below=True)
            if until_steady and sum(window) >= SETTLE_WINDOW_S:
                medians, window = [*medians[1 - SETTLE_WINDOWS :], statistics.median(window)], []
                if len(medians) == SETTLE_WINDOWS and max(medians) <= (1 + SETTLE_TOLERANCE) * min(medians):
                    return ended("steady")
    finally:
        if probe is not None:
            probe.close()


class Probe:
    """nvidia-smi sampling PROBE for PROBE_S while a hold's steps run; then whether every sample was far
    below the power limit. The caller keeps stepping while it samples and while it exits, so the GPU
    never waits on it."""

    def __init__(self, gpu: str):
        self.begun, self.verdict, self.samples, self.process = timeit.default_timer(), None, Samples(), None
        smi = shutil.which("nvidia-smi")
        query = [f"--query-gpu={','.join(PROBE)}", "--format=csv,noheader,nounits", "-lms", str(PROBE_INTERVAL_MS)]
        try:
            if smi is not None:
                self.process = subprocess.Popen(
                    [smi, "-i", gpu, *query], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
        except OSError as error:
            log.warning(f"no power probe: {error}")
        if self.process is None:
            self.verdict = False

    def far_below(self) -> bool:
        """False until the samples are in, then the verdict: at least two samples, each under FAR_BELOW
        of the limit, at the top clock, with no reason but idle. No sample ("[N/A]" where the driver
        has no instantaneous power): False, and the hold keeps its windows."""
        if self.verdict is not None:
            return self.verdict
        if timeit.default_timer() - self.begun < PROBE_S:
            return False
        if self.process.poll() is None:
            self.process.terminate()  # read once it has exited, a step or so from now
            return False
        self.samples.parse(self.process.communicate()[0], fields=len(PROBE), interval_ms=PROBE_INTERVAL_MS)
        rows = self.samples.rows
        self.verdict = len(rows) >= 2 and all(
            power < FAR_BELOW * limit and clock >= top and mask & ~IDLE == 0 for power, limit, clock, top, mask in rows
        )
        if not rows:
            log.info(f"power probe: {self.samples.reason}; the hold keeps its windows")
        return self.verdict

    def said(self) -> str:
        """What the probe found, for the hold's log line: why it did not end the hold."""
        rows = self.samples.rows
        if self.verdict is None:
            return "the probe had no verdict yet"
        if not rows:
            return f"the probe had no sample: {self.samples.reason or 'nvidia-smi missing'}"
        share = max(power / limit for power, limit, *_ in rows)
        low = min(clock for _, _, clock, _, _ in rows)
        return (
            f"probe: {len(rows)} samples, up to {share:.1%} of the power limit, "
            f"SM clock down to {low:.0f} of {rows[0][3]:.0f} MHz, reasons {hex(self.samples.reasons())}"
        )

    def close(self) -> None:
        """Stop nvidia-smi if it still runs, and reap it."""
        if self.process is not None and self.process.returncode is None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.communicate()


@dataclass
class Samples:
    """Median SM clock (MHz), power draw and limit (W) and temperature (°C) over the samples, and the
    clock-event reasons seen; ``reason`` when there are none."""

    rows: list[tuple[float, ...]] = field(default_factory=list)  # COLUMNS' values, then the reasons' mask
    reason: str = ""

    def parse(self, text: str, fields: int = len(QUERY), interval_ms: int = INTERVAL_MS) -> None:
        """nvidia-smi's CSV lines of ``fields`` fields, the last the clock-event reasons' mask."""
        for line in text.splitlines():
            values = line.split(",")
            if len(values) != fields:  # a line cut short when the sampler was stopped
                continue
            try:
                self.rows.append((*(float(v) for v in values[:-1]), int(values[-1], 16)))
            except ValueError:  # "[N/A]"
                continue
        if not self.rows and not self.reason:
            said = text.strip().splitlines()[0] if text.strip() else f"none in the block (one every {interval_ms} ms)"
            self.reason = f"nvidia-smi gave no sample: {said}"

    def nearer_the_limit(self) -> bool:
        """Whether any sample (``QUERY``'s) drew FAR_BELOW of the power limit or more, or saw a
        clock-event reason but idle: a block timed after a hold the probe ended, contradicting it.
        A block too short for a sample contradicts nothing. ``power.draw`` averages about a second, so
        a first sample may still carry the block before: at worst a block is timed again for nothing."""
        return any(power >= FAR_BELOW * limit or mask & ~IDLE for _, power, limit, _, mask in self.rows)

    def reasons(self) -> int:
        """Every clock-event reason seen in any sample: the OR of the rows' masks (their last field)."""
        seen = 0
        for *_, mask in self.rows:
            seen |= mask
        return seen

    def columns(self, prefix: str) -> dict:
        """Each numeric field's median, and every clock-event reason seen in any sample (``reasons``)."""
        fields = list(zip(*self.rows)) or [[float("nan")]] * len(COLUMNS) + [[]]
        return {
            **{prefix + name: statistics.median(values) for name, values in zip(COLUMNS, fields[:-1], strict=True)},
            prefix + REASONS: hex(self.reasons()) if self.rows else "",
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
