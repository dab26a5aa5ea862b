"""Variants timed in turns of blocks, each block held in its own power state first: A B C A B C.

Why blocks, not steps interleaved A B A B: a GPU near its power limit sets its clock from the last
second or so of work. Steps interleaved one by one each run at the clock of the mix, so a variant
that draws more power than its neighbours is timed faster than it runs on its own, and one that
draws less, slower (at 2.7B, context 1024, on an H200, naive attention's forward + backward and ours
both ran at 1710 MHz interleaved, our speed-up 1.13×, and at 1957-1965 and 1650-1702 MHz in blocks
of their own, 1.07-1.08×; notes/one-allocation.md, section 10).
A block is held untimed until its step time stops moving (``lmperf.measure.power.hold``), then
timed while the SM clock and power are sampled; taking turns keeps a slow stretch of the run from
landing on one variant alone, and the turns' medians side by side show whether they agree.

The e2e harness (``lmperf.measure.harness``) and the ladder (``lmperf.studies.ladder``) time their
variants this way.
"""

import logging
import statistics
from dataclasses import dataclass

import torch

from lmperf.measure.phases import phase
from lmperf.measure.power import Held, Samples, hold, sampled
from lmperf.measure.stats import join_ms
from lmperf.measure.timing import Budget, Timings, free_memory, measure

TURNS = 2  # turns each variant takes, A B C A B C
log = logging.getLogger(__name__)


@dataclass
class Turn:
    """One turn of a variant: its timed steps, the GPU's clock and power meanwhile, how many untimed
    steps held it first, for how long, and whether it was timed a second time (``timed_block``)."""

    timings: Timings
    clocks: Samples
    settle_steps: int
    settle_s: float = 0.0
    retimed: bool = False

    @property
    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.timings.host_s)


def timed_block(name: str, step, device: torch.device, warmup_steps: int, budget: Budget, settle_s: float, gpu) -> Turn:
    """``step`` run once (it may compile), held untimed until steady (at most ``settle_s``; sooner where
    ``gpu`` shows its work far below the power limit), then timed by ``measure`` while ``gpu``'s clock
    and power are sampled. Where the probe ended the hold but the samples of the timed block show the
    work nearer the limit, the block is held by the windows alone and timed again. Out of memory: a
    Turn whose timings carry the error."""
    try:
        with phase("warmup"):  # the first call compiles and autotunes: the job's cost split counts it so
            step()
        held = hold(step, device, settle_s, gpu=gpu)
    except torch.OutOfMemoryError as error:
        free_memory(device)
        return Turn(Timings(error=error.with_traceback(None)), Samples(), 0)

    def timed() -> tuple[Timings, Samples]:
        with sampled(gpu) as clocks:  # no full collection per block (measure's collect): 0.1-0.3 s each
            return measure({name: step}, device, warmup_steps, budget, collect=False)[name], clocks

    timings, clocks = timed()
    if held.far_below and timings.error is None and clocks.nearer_the_limit():
        log.info(
            f"{name}: timed at {clocks.columns('')['power_w']:.0f} W after a hold the probe ended: held and timed again"
        )
        try:  # within the hold's time allowed, what the probe left of it
            again = hold(step, device, max(settle_s - held.seconds, 0.0))
        except torch.OutOfMemoryError as error:
            free_memory(device)
            return Turn(Timings(error=error.with_traceback(None)), Samples(), held.steps, held.seconds)
        held = Held(held.steps + again.steps, held.seconds + again.seconds)
        timings, clocks = timed()
        return Turn(timings, clocks, held.steps, held.seconds, retimed=True)
    return Turn(timings, clocks, held.steps, held.seconds)


def pooled(turns: list[Turn]) -> tuple[Timings, Samples]:
    """A variant's turns as one measurement: every timed step and every clock sample, in turn order."""
    timings = Timings(
        host_s=[t for turn in turns for t in turn.timings.host_s],
        event_s=[t for turn in turns for t in turn.timings.event_s],
        warmup_s=turns[0].timings.warmup_s,
    )
    clocks = Samples(rows=[row for turn in turns for row in turn.clocks.rows], reason=turns[0].clocks.reason)
    return timings, clocks


def turn_columns(turns: list[Turn], prefix: str = "replay_") -> dict:
    """Each turn's median step, SM clock, power, temperature, clock-event reasons, hold and whether it
    was timed again (1) or not (0), ';'-separated: whether the turns agree, and if not, what held the
    clock down."""
    clocks = [turn.clocks.columns("") for turn in turns]
    return {
        f"{prefix}turns": len(turns),
        f"{prefix}turn_ms": join_ms([turn.median_ms / 1e3 for turn in turns]),
        f"{prefix}turn_sm_clock_mhz": ";".join(f"{c['sm_clock_mhz']:.0f}" for c in clocks),
        f"{prefix}turn_power_w": ";".join(f"{c['power_w']:.0f}" for c in clocks),
        f"{prefix}turn_temperature_c": ";".join(f"{c['temperature_c']:.0f}" for c in clocks),
        f"{prefix}turn_clock_event_reasons": ";".join(c["clock_event_reasons"] for c in clocks),
        f"{prefix}settle_steps": sum(turn.settle_steps for turn in turns),
        f"{prefix}turn_settle_s": ";".join(f"{turn.settle_s:.2f}" for turn in turns),
        f"{prefix}turn_retimed": ";".join(str(int(turn.retimed)) for turn in turns),
    }
