"""One timer for every study: synchronized steps, adaptive repetition, A/B interleaving, CUDA graphs.

A step launched from Python costs host time per kernel; on a slow host the synchronized wall clock
then measures the host, not the GPU. So a step is timed two ways:

- **launched**: as the handout does it, ``timeit.default_timer`` around the step, synchronized
  before the clock is read (CUDA events bracket the same step: a check of the timer only, since
  both clocks see the same launch gaps);
- **graphed**: the same step captured once as a CUDA graph (``capture_graph``) and replayed, which
  removes the launch overhead and leaves the GPU's own time.

``measure`` runs several steps interleaved (A B A B ...), so a slow stretch of the run hits every
variant alike, and repeats until every median's bootstrap CI is tight or the time budget is spent.
Python's garbage collector is paused while timing, as ``timeit`` does.
"""

import gc
import os
import timeit
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from lmperf.measure.phases import phase
from lmperf.measure.stats import converged
from lmperf.ranges import profiled_range

Step = Callable[[], object]
HOST_BOUND = 0.10  # a step is host-bound when launched it takes more than 10% longer than replayed


def host_bound(launched_ms: float, graphed_ms: float, threshold: float = HOST_BOUND) -> bool:
    """Launched time more than ``threshold`` over the graphed one: the host, not the GPU, sets the pace.
    Rows that state it carry the threshold too (``host_bound_threshold``)."""
    return bool(launched_ms > (1 + threshold) * graphed_ms)


def resolve_device(name: str = "auto") -> torch.device:
    """The device a study measures on: ``auto`` is CUDA where a GPU is visible, else the CPU. A CUDA
    device asked for where none is visible is refused: the pipeline's ``device`` setting says where
    its results were measured, and a row measured elsewhere would be filed under the wrong one."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        why = (
            f"torch {torch.__version__} is built without CUDA"
            if torch.version.cuda is None
            else "no CUDA GPU is visible"
        )
        raise SystemExit(f"--device {name}: {why} here (CUDA_VISIBLE_DEVICES={visible})")
    return device


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release_cached(device: torch.device) -> None:
    """Return the allocator's cached blocks to the device, e.g. before a CUDA graph's private pool
    needs them. Enough where what was just dropped sits in no reference cycle (gradients, a graph's
    replay, a pass's outputs): such tensors are freed the moment their last reference goes."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def free_memory(device: torch.device) -> None:
    """Collect unreachable reference cycles, then return cached blocks to the device. For what may sit
    in a cycle: an exception's traceback (its frames hold their tensors), a dropped model, optimizer
    or compiled step. A full collection walks every Python object, 0.1-0.27 s once a model has
    compiled (notes/one-allocation.md), so code that drops only plain tensors calls
    ``release_cached``."""
    gc.collect()
    release_cached(device)


def time_once(step: Step, device: torch.device) -> tuple[float, float | None]:
    """Host seconds of one synchronized step, and the CUDA-event seconds of it (None on a CPU)."""
    cuda = device.type == "cuda"
    synchronize(device)
    if cuda:
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start_event.record()
    start = timeit.default_timer()
    step()
    if cuda:
        end_event.record()
    synchronize(device)
    elapsed = timeit.default_timer() - start
    return elapsed, start_event.elapsed_time(end_event) / 1e3 if cuda else None


@dataclass(frozen=True)
class Budget:
    """When to stop: at least ``min_steps`` per step, then more until every median's CI half-width
    is at most ``rel_halfwidth`` of it, or ``max_seconds`` of measuring, or ``max_steps``."""

    min_steps: int = 10
    rel_halfwidth: float = 0.01
    max_seconds: float = 30.0
    max_steps: int = 1000

    def __post_init__(self):
        if self.min_steps < 1 or self.max_steps < self.min_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {self.min_steps}, {self.max_steps}")
        if self.rel_halfwidth <= 0 or self.max_seconds < 0:
            raise ValueError("rel_halfwidth must be > 0 and max_seconds >= 0")


@dataclass
class Timings:
    """What ``measure`` saw of one step."""

    host_s: list[float] = field(default_factory=list)  # measured steps, synchronized wall clock
    event_s: list[float] = field(default_factory=list)  # CUDA events around the same steps (empty on a CPU)
    warmup_s: list[float] = field(default_factory=list)  # the warm-up steps, first call first
    error: BaseException | None = None  # out of memory: the step was dropped from the run

    @property
    def first_call_s(self) -> float:
        """The step's first call in this run (warm-up or measured): compilation and lazy set-up land here."""
        return (self.warmup_s or self.host_s)[0]

    def converged(self, budget: Budget) -> bool:
        return len(self.host_s) >= budget.min_steps and converged(self.host_s, budget.rel_halfwidth)


def measure(
    steps: dict[str, Step],
    device: torch.device,
    warmup_steps: int,
    budget: Budget,
    before: Callable[[str], None] | None = None,
    settled: Callable[[dict[str, Timings]], bool] | None = None,
    agree: Callable[[bool], bool] | None = None,
    collect: bool = True,
) -> dict[str, Timings]:
    """Warm up, then time ``steps`` in interleaved rounds until ``budget`` says stop.

    ``before(name)`` runs untimed before each call of step ``name`` (e.g. to swap the attention of a
    shared model). ``settled(timings)`` says when the steps measured so far suffice (default: every
    median's CI is tight); it is asked after ~12% more steps each time, as the bootstrap costs far
    more than a short step. ``agree(stop)`` turns this process's decision to stop into one that all
    processes share: data-parallel ranks must run the same number of steps, or a collective hangs.
    A step that runs out of memory is dropped, its Timings carrying the error. ``collect=False`` skips
    the full garbage collection before the warm-up (0.1-0.3 s once a model has compiled,
    notes/one-allocation.md), for a caller that frees its memory itself: the collector is paused
    while the steps are timed either way.
    """
    timings = {name: Timings() for name in steps}
    live = dict(steps)
    settled = settled or (lambda t: all(t[n].converged(budget) for n in live))

    def run(name: str, measured: bool) -> None:
        if before is not None:
            before(name)
        try:
            with profiled_range("measured step" if measured else "warmup step"):
                host, event = time_once(live[name], device)
        except torch.OutOfMemoryError as error:
            timings[name].error = error.with_traceback(None)  # its frames would keep the step's tensors alive
            del live[name]
            free_memory(device)
            return
        if measured:
            timings[name].host_s.append(host)
            if event is not None:
                timings[name].event_s.append(event)
        else:
            timings[name].warmup_s.append(host)

    if collect:
        gc.collect()
    gc.disable()
    try:
        with phase("warmup"):  # compilation and autotuning happen in the first calls
            for name in steps:
                for _ in range(warmup_steps):
                    if name in live:
                        run(name, measured=False)
        with phase("timed"):
            start = timeit.default_timer()
            while live:
                for name in list(live):
                    run(name, measured=True)
                counts = [len(timings[n].host_s) for n in live]
                done = min(counts, default=0)
                stop = (
                    not counts
                    or max(counts) >= budget.max_steps
                    or done >= budget.min_steps
                    and (
                        timeit.default_timer() - start > budget.max_seconds
                        or (done - budget.min_steps) % max(1, done // 8) == 0
                        and settled(timings)
                    )
                )
                if agree is not None:
                    stop = agree(stop)
                if stop:
                    break
    finally:
        gc.enable()
    return timings


class PhaseClock:
    """Times named phases of a step (``with clock("backward"): ...``): CUDA events on a GPU, read
    after the run, so timing adds no synchronization; the host clock on a CPU. Pass ``clock`` as
    lmperf.training.make_step's ``phase`` to time forward, backward and the optimizer step."""

    def __init__(self, device: torch.device):
        self.device, self.samples = device, {}

    @contextmanager
    def __call__(self, name: str):
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self.samples.setdefault(name, []).append((start, end))
        else:
            start = timeit.default_timer()
            yield
            self.samples.setdefault(name, []).append(timeit.default_timer() - start)

    def seconds(self, name: str, last: int | None = None) -> list[float]:
        """The phase's times in seconds, the ``last`` ones only if given (the measured steps)."""
        synchronize(self.device)
        samples = self.samples.get(name, [])
        samples = samples[len(samples) - last :] if last is not None else samples
        return [s[0].elapsed_time(s[1]) / 1e3 if isinstance(s, tuple) else s for s in samples]


class GraphUnavailable(Exception):
    """The step cannot be replayed as a CUDA graph; the message is the reason, for the row's note."""


_capture_streams: dict[torch.device, torch.cuda.Stream] = {}
_warm_streams: set[torch.device] = set()


def capture_stream_warm(device: torch.device) -> bool:
    """Whether a step has run on ``device``'s capture stream in this process, so its lazy state exists."""
    return device in _warm_streams


@phase("capture")
def capture_graph(
    step: Step, device: torch.device, pool=None, warmup_steps: int = 1, after_warmup: Callable[[], None] | None = None
) -> Step:
    """Capture ``step`` as a CUDA graph and return its replay.

    The step is warmed up on the capture stream first (lazy per-stream state such as cuBLAS
    workspaces must exist before capture), as torch's CUDA-graph notes prescribe. Everything the
    step reads must stay at fixed addresses (model, batch, optimizer state), and its host-side
    state must not change between calls (a capturable optimizer keeps its step count on the
    device). ``pool`` lets several graphs share one memory pool when they never run concurrently.
    ``after_warmup`` runs between warm-up and capture, e.g. to drop the warm-up's gradients; then
    the warm-up's cached blocks go back to the device, since the graph's pool cannot reuse them.
    A step that already ran launched may skip the warm-up (``warmup_steps=0``) once the capture
    stream is warm (``capture_stream_warm``). That matters for large steps: the warm-up's blocks
    belong to the capture stream, so beside the launched steps' cached blocks, which only the
    default stream can reuse, it needs a second step's memory.
    A capture that runs out of memory is tried once more after a full garbage collection: a dead
    reference cycle may hold what it lacked. Collecting before every capture instead costs 0.1-0.27 s
    a capture (notes/one-allocation.md), more than many captures take.
    """
    try:
        return _capture_once(step, device, pool, warmup_steps, after_warmup)
    except GraphUnavailable as error:
        if not isinstance(error.__cause__, torch.OutOfMemoryError):
            raise
    free_memory(device)
    return _capture_once(step, device, pool, warmup_steps, after_warmup)


def _capture_once(
    step: Step, device: torch.device, pool=None, warmup_steps: int = 1, after_warmup: Callable[[], None] | None = None
) -> Step:
    """One try of ``capture_graph``."""
    if device.type != "cuda":
        raise GraphUnavailable(f"CUDA graphs need a CUDA device; this run is on {device.type}")
    release_cached(device)  # the graph's pool is private: hand the launched steps' cached blocks back first
    try:
        if device not in _capture_streams:
            _capture_streams[device] = torch.cuda.Stream(device)
        stream = _capture_streams[device]
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(warmup_steps):
                step()
        if warmup_steps:
            _warm_streams.add(device)
        torch.cuda.current_stream(device).wait_stream(stream)
        if after_warmup is not None:
            after_warmup()
        release_cached(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            step()
    except torch.OutOfMemoryError as error:
        free_memory(device)
        raise GraphUnavailable(f"graph capture ran out of memory: {str(error).splitlines()[0]}") from error
    except RuntimeError as error:
        free_memory(device)
        raise GraphUnavailable(f"graph capture failed: {str(error).splitlines()[0]}") from error
    return graph.replay


def graph_pool(device: torch.device):
    """A memory pool that the graphs of one measurement share (None on a CPU)."""
    return torch.cuda.graph_pool_handle() if device.type == "cuda" else None
