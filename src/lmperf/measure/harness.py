"""Time forward, forward+backward and full train steps of the Transformer LM, launched and graphed.

The handout's method: build the model and one random batch, run ``warmup_steps`` untimed steps,
then timed ones, each synchronized (``lmperf.measure.timing``). Measured steps are adaptive: at
least ``measured_steps``, then more until the median's CI is tight or the point's time budget is
spent. Every step is timed twice:

- **launched** from Python, as the handout asks; on a slow host this is the host's time;
- **graphed**: captured as a CUDA graph and replayed, the GPU's own time. A row whose launched
  median exceeds the graphed one by more than ``host_bound_threshold`` is host-bound.

Several attention variants share one model (weights, optimizer state, compiled blocks) and are
timed in one process. Launched, they are interleaved step by step, A B A B, so a slow stretch of the
host hits them alike. Replayed, they take turns in blocks (``lmperf.measure.turns``), each held
first, with ``settle_seconds``, until its time per step stops moving, so that near the power limit
each variant runs at the clock its own work keeps (steps interleaved one by one run at the clock of
the mix); the SM clock and power sampled while a variant's replays are timed, and how long its holds
took (``graphed_settle_s``), go on its rows. Each row names the attention kernels that ran
(``attention_kernel``: for our FlashAttention, Triton or Gluon). One process
sweeps the context lengths: gradients and optimizer state are dropped between contexts.
"""

import gc
import logging
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import cache, partial

import torch

from lmperf.attention import attention_kernel, forget_kernels
from lmperf.measure.env import fingerprint
from lmperf.measure.flops import peak_tflops, step_flops
from lmperf.measure.phases import phase
from lmperf.measure.power import SETTLE_RULE, nvidia_smi_id
from lmperf.measure.stats import join_ms, summarize_ms
from lmperf.measure.timing import (
    HOST_BOUND,
    Budget,
    GraphUnavailable,
    Timings,
    capture_graph,
    capture_stream_warm,
    free_memory,
    host_bound,
    measure,
    release_cached,
    time_once,
)
from lmperf.measure.turns import TURNS, pooled, timed_block, turn_columns
from lmperf.memory_trace import events_from_profiler, live_bytes
from lmperf.model import count_parameters, make_optimizer, repeated_batch_lr
from lmperf.ranges import profiled_range
from lmperf.training import MODES, PRECISIONS, build_model, compile_blocks, make_step, random_batch, use_attention

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchmarkSpec:
    size: str
    context_lengths: tuple[int, ...]
    batch_size: int = 4
    precision: str = "fp32"
    compile: bool = False
    attentions: tuple[str, ...] = ("naive",)
    optimizer: str = "lmperf"
    warmup_steps: int = 5
    budget: Budget = field(default_factory=Budget)
    graphed: bool = True
    settle_seconds: float = 0.0
    host_bound_threshold: float = HOST_BOUND
    # Warm-up counts read from one process (the warm-up study): every step is timed, and count w
    # gets a row of its own whose warm-up is the process's first w steps and whose timed steps are
    # the budget's min_steps after them. The handout runs each count in a process of its own; these
    # rows hold the same steps, and put the counts side by side in one process, apart from how fast
    # each process's host happens to be.
    warmup_windows: tuple[int, ...] = ()

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.warmup_steps < 0:
            raise ValueError("warmup_steps must be >= 0")
        if self.settle_seconds < 0:
            raise ValueError("settle_seconds must be >= 0")
        if not self.context_lengths or min(self.context_lengths) < 1:
            raise ValueError(f"context_lengths must be positive, got {self.context_lengths}")
        if not self.attentions:
            raise ValueError("attentions must name at least one variant")
        if self.warmup_windows and (min(self.warmup_windows) < 0 or self.warmup_steps or self.graphed):
            raise ValueError("warmup_windows are counts >= 0 of launched steps: no warmup_steps, no graph")


def run_benchmark(spec: BenchmarkSpec, modes=MODES, device: torch.device | None = None) -> list[dict]:
    """One tidy row per (attention, context length, mode); out-of-memory becomes a row with status 'oom'."""
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = fingerprint(device)
    config = {
        k: v
        for k, v in asdict(spec).items()
        if k not in ("context_lengths", "attentions", "budget", "graphed", "warmup_windows")
    }
    base = {
        "study": "e2e",
        **config,
        **SETTLE_RULE,
        "compile": "compiled" if spec.compile else "eager",
        "params": None,
        "measured_steps": spec.budget.min_steps,
        "ci_halfwidth": spec.budget.rel_halfwidth,
        "device": str(device),
        "matmul_precision": torch.get_float32_matmul_precision(),
    }

    free_memory(device)  # a model an earlier call built (the batch study's last batch size) may sit in a cycle
    try:
        model = build_model(spec.size, max(spec.context_lengths), device, spec.attentions[0])
    except torch.OutOfMemoryError as error:
        note = f"model construction: {str(error).splitlines()[0]}"
        free_memory(device)
        return [
            {**base, "attention": a, "context_length": c, "mode": m, "status": "oom", "note": note, **count, **env}
            for a in spec.attentions
            for c in spec.context_lengths
            for m in modes
            for count in counted_columns(spec).values()
        ]
    base["params"] = count_parameters(model)
    log.info(f"built {spec.size} ({base['params']:,} parameters) on {device}")
    if spec.compile:
        compile_blocks(model)
    base["lr"] = repeated_batch_lr(model.cfg.d_model)  # the ladder's rate: its steps on one batch stay finite
    optimizer = make_optimizer(spec.optimizer, model.parameters(), lr=base["lr"])

    @cache
    def initial() -> dict[str, torch.Tensor]:
        """The weights restore() copies back, drawn on its first call."""
        return build_model(spec.size, max(spec.context_lengths), torch.device("cpu")).state_dict()

    def restore() -> None:
        """Finite weights back, copied in place, so compiled blocks and graphs keep their addresses; and
        an empty optimizer state. The weights are drawn again from the same seed on the CPU (not the
        draw the GPU made: the same distribution) on the first call and kept in host memory for the
        next, until this call returns (13.6 GB at 2.7B, as much as a draw holds while it runs): at
        2.7B a draw took 20-29 s and a copy 2 s, and a job whose variants break the weights at several
        points restores at each (notes/one-allocation.md, section 17)."""
        model.load_state_dict(initial())
        optimizer.state.clear()
        log.warning("the weights became non-finite: weights from the same seed are restored")

    rows = []
    for ctx in spec.context_lengths:
        tokens, targets = random_batch(model.cfg.vocab_size, spec.batch_size, ctx, device)
        for mode in modes:
            step = make_step(mode, model, optimizer, tokens, targets, spec.precision, device)
            point = {**base, "context_length": ctx, "mode": mode}
            held = partial(between_steps, model, optimizer, tokens, targets)
            forget_kernels()
            for attention, result in time_point(step, model, spec, device, held, restore).items():
                # one row, or with warmup_windows one row per warm-up count, each its window's columns
                # (an oom or error row once per count, as a process per count would have written it)
                windows = result.pop("windows", {})
                for counted, count in counted_columns(spec).items():
                    row = {
                        **point,
                        "attention": attention,
                        "attention_kernel": attention_kernel(attention),
                        **result,
                        **windows.get(counted, {}),
                        **count,
                        **env,
                    }
                    if row["status"] == "ok":
                        peak = peak_tflops(env["device_name"], spec.precision)
                        row.update(_rates(row, model.cfg, spec.batch_size, ctx, mode, peak))
                    rows.append(row)
                    log.info(
                        f"ctx {ctx:>6} {mode:>16} {attention:>12} {row['status']:>4} "
                        f"{row.get('median_ms', float('nan')):10.3f} ms"
                        + (f" after {counted} warm-up steps" if counted is not None else "")
                        + (f" graphed {row.get('graphed_median_ms', float('nan')):10.3f} ms" if spec.graphed else "")
                        + f" {row['note']}"
                    )
            del step
            model.zero_grad(set_to_none=True)
            free_memory(device)
        optimizer.state.clear()
        del tokens, targets
        free_memory(device)
    return rows


def time_point(step, model, spec: BenchmarkSpec, device: torch.device, held=None, restore=None) -> dict[str, dict]:
    """Every attention variant of one point, launched, then replayed as a CUDA graph; ``held()`` lists
    the tensors that live between steps, for the peak memory on a CPU.

    Launched, as the handout times a step: ``warmup_steps`` untimed steps (compilation and autotuning
    land there), then the variants interleaved step by step, A B A B, so a slow stretch of the host
    hits them alike. Replayed, in turns of blocks (``lmperf.measure.turns``): in each of ``TURNS``
    turns, variant by variant, the step is captured, its replays are held until their time per step
    stops moving (at most ``settle_seconds``) and timed while the SM clock and power are sampled, and
    the graph is dropped. Near the power limit a variant's replays so run at the clock its own work
    keeps, where launched steps interleaved run at the clock of the mix: the GPU's conclusions come
    from the replays. One graph at a time, so a point needs the memory of one step beside the model.

    The variants share the model, so a step that turns its weights into NaN or inf would leave every
    later step timing a broken model, whose products draw less power and run at a higher clock (at
    2.7B, naive attention compiled in bf16 did: notes/one-allocation.md, section 10). So each
    variant warms up on its own and the weights are checked after it: a variant that broke them is an
    ``error`` row, and ``restore()`` (where given) brings finite weights back before the next.
    A variant's replays, timed in blocks of their own, are checked after each block. The launched
    steps interleave, so if they broke the weights, the replays are skipped and each variant is timed
    again alone from restored weights: the one that breaks them is the ``error`` row (without
    ``restore``, every row of the point is).
    """
    warmups, results = {}, {}
    for attention in spec.attentions:
        use_attention(model, attention)
        try:
            with phase("warmup"), paused_gc():  # compilation and autotuning happen in the first calls
                warmups[attention] = [warmup_step(step, device) for _ in range(spec.warmup_steps)]
        except torch.OutOfMemoryError as error:
            results[attention] = {"status": "oom", "note": str(error).splitlines()[0]}
            free_memory(device)  # the error's traceback holds the step's tensors
            continue
        if warmups[attention] and not finite(model):  # with no warm-up, the first timed step stays the first
            results[attention] = {"status": "error", "note": f"{BROKEN} in its warm-up steps"}
            if restore is not None:
                restore()
    windows = spec.warmup_windows
    budget = spec.budget
    if windows:  # every step timed, exactly as many as the longest window needs
        steps = max(windows) + budget.min_steps
        budget = replace(budget, min_steps=steps, max_steps=steps, max_seconds=0.0)
    launched = measure(
        {a: step for a in spec.attentions if a not in results},
        device,
        0,
        budget,
        before=lambda attention: use_attention(model, attention),
        collect=False,  # the collector is paused while they are timed either way
    )
    for attention, timings in launched.items():
        timings.warmup_s = warmups[attention]
        if timings.error is not None:
            results[attention] = {"status": "oom", "note": str(timings.error).splitlines()[0]}
        else:
            results[attention] = {"status": "ok", "note": "", **launched_columns(timings, spec.budget)}
            if windows:
                results[attention]["windows"] = {
                    w: launched_columns(window(timings, w, spec.budget.min_steps), spec.budget) for w in windows
                }
            use_attention(model, attention)
            results[attention]["peak_mem_gib"] = steady_peak_gib(step, device, held, model)
    broken = not finite(model)  # by a launched step: which variant's is not known, as they interleave
    if spec.graphed and not broken:
        broken = replay_in_turns(step, model, spec, device, results, restore)
    if broken:
        ok = [a for a, r in results.items() if r["status"] == "ok"]
        for attention in ok:
            results[attention].update(status="error", note=f"{BROKEN} in this point's timed steps")
        if restore is not None:
            restore()
            if len(ok) > 1:  # each variant again, alone from restored weights: the one that breaks them says so
                for attention in ok:
                    alone = time_point(step, model, replace(spec, attentions=(attention,)), device, held, restore)
                    results[attention] = alone[attention]
                    if alone[attention]["status"] == "ok":
                        results[attention]["note"] = "; ".join(n for n in (ALONE, alone[attention]["note"]) if n)
    return {attention: results[attention] for attention in spec.attentions}


BROKEN = "the weights became non-finite (NaN or inf)"
ALONE = "timed alone: interleaved with the other variants, one of them broke the weights"


@contextmanager
def paused_gc():
    """Python's garbage collector off for the block, as ``measure`` times: no collection lands in a
    warm-up step's recorded time. No full collection first: each walks every object (0.16 s; with
    the launched steps', an e2e job made 48, notes/one-allocation.md). ``free_memory`` collects
    before the model is built and after each point."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def warmup_step(step, device: torch.device) -> float:
    """One untimed step's seconds, in a profiler range of its own as ``measure`` marks its warm-up."""
    with profiled_range("warmup step"):
        return time_once(step, device)[0]


def finite(model: torch.nn.Module) -> bool:
    """Whether every weight of ``model`` is finite (one synchronization)."""
    return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())


def replay_in_turns(step, model, spec: BenchmarkSpec, device: torch.device, results: dict[str, dict], restore) -> bool:
    """The replayed half of ``time_point``: each ok variant's graphed columns, from its turns. A block
    that broke the weights makes its variant an ``error`` row and, with ``restore``, the weights come
    back before the next block; without it, True: the point's weights are broken."""
    gpu, budget, replayed = nvidia_smi_id(device), per_turn(spec.budget), {}
    for _ in range(TURNS):
        for attention, result in results.items():
            if result["status"] != "ok" or "graphed_median_ms" in result:  # out of memory, or no graph
                continue
            use_attention(model, attention)
            try:  # the variant ran launched already: only the process's first capture warms its stream up
                replay = capture_graph(
                    step,
                    device,
                    warmup_steps=0 if capture_stream_warm(device) else 1,
                    after_warmup=lambda: model.zero_grad(set_to_none=True),
                )
            except GraphUnavailable as reason:
                result.update(graphed_median_ms=float("nan"), note=str(reason))
                continue
            block = timed_block(attention, replay, device, 1, budget, spec.settle_seconds, gpu)
            del replay
            model.zero_grad(set_to_none=True)  # the capture's gradients live in the graph's pool
            release_cached(device)
            if block.timings.error is not None:
                note = f"graph replay: {str(block.timings.error).splitlines()[0]}"
                result.update(graphed_median_ms=float("nan"), note=note)
            elif not finite(model):  # this variant's replays broke the weights
                result.update(status="error", note=f"{BROKEN} in its replays")
                if restore is None:
                    return True
                restore()
            else:
                replayed.setdefault(attention, []).append(block)
    for attention, turns in replayed.items():
        result = results[attention]
        if result["status"] != "ok" or "graphed_median_ms" in result:  # broken, or a later turn failed
            continue  # the row keeps its reason, not half a measurement
        timings, clocks = pooled(turns)
        result.update(graphed_columns(timings, result["median_ms"], spec.budget, spec.host_bound_threshold))
        result.update(clocks.columns("graphed_"), **turn_columns(turns, "graphed_"))
        result["graphed_settle_s"] = sum(turn.settle_s for turn in turns)
    return False


def counted_columns(spec: BenchmarkSpec) -> dict:
    """The columns that set a row's warm-up count apart, by count: {None: {}} without warmup_windows."""
    if not spec.warmup_windows:
        return {None: {}}
    column = ";".join(map(str, spec.warmup_windows))
    return {w: {"warmup_steps": w, "warmup_windows": column} for w in spec.warmup_windows}


def window(timings: Timings, warmup: int, steps: int) -> Timings:
    """``timings`` as if its first ``warmup`` steps had been untimed warm-up and the ``steps`` after them
    the measured ones."""
    return Timings(
        host_s=timings.host_s[warmup : warmup + steps],
        event_s=timings.event_s[warmup : warmup + steps],
        warmup_s=timings.host_s[:warmup],
    )


def per_turn(budget: Budget) -> Budget:
    """One block's share of a point's budget: its steps and seconds split over the turns."""
    return replace(
        budget,
        min_steps=math.ceil(budget.min_steps / TURNS),
        max_seconds=budget.max_seconds / TURNS,
        max_steps=max(math.ceil(budget.max_steps / TURNS), math.ceil(budget.min_steps / TURNS)),
    )


def graphed_columns(timings: Timings, launched_ms: float, budget: Budget, threshold: float = HOST_BOUND) -> dict:
    """The graphed_* columns of a replayed step, and how much of the launched median is the host's:
    host-bound where launched is more than ``threshold`` over graphed."""
    graphed = summarize_ms(timings.host_s, prefix="graphed_")
    keep = ("median_ms", "ci95_low_ms", "ci95_high_ms", "cv", "n_steps")
    return {
        **{f"graphed_{k}": graphed[f"graphed_{k}"] for k in keep},
        "graphed_converged": timings.converged(budget),
        "host_overhead_ms": launched_ms - graphed["graphed_median_ms"],
        "host_bound": host_bound(launched_ms, graphed["graphed_median_ms"], threshold),
        "graphed_step_times_ms": join_ms(timings.host_s),
    }


def launched_columns(timings: Timings, budget: Budget) -> dict:
    """The columns of a step launched from Python: median with CI, spread, first call, raw times."""
    return {
        **summarize_ms(timings.host_s),
        "converged": timings.converged(budget),
        "event_median_ms": summarize_ms(timings.event_s)["median_ms"] if timings.event_s else float("nan"),
        "first_step_ms": timings.first_call_s * 1e3,
        "warmup_times_ms": join_ms(timings.warmup_s),
        "step_times_ms": join_ms(timings.host_s),
    }


def steady_peak_gib(step, device: torch.device, held=None, model: torch.nn.Module | None = None) -> float:
    """Peak allocated memory of one more step, well past the first: optimizer state exists (steady state).

    On CUDA, the allocator's peak. A CPU keeps no such statistic, so there (given ``held``, a callable
    listing the tensors that live between steps: weights, buffers, optimizer state, the batch) the
    peak is those tensors' bytes plus the most that the step itself holds at once, from
    torch.profiler's allocation trace. The model's gradients are dropped first, as the step's own
    ``zero_grad(set_to_none=True)`` does: the profiler sees no free of a block made before it started.
    """
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) / 2**30
    if held is None or torch.autograd.profiler._is_profiler_enabled:
        return float("nan")  # no allocation trace, or a profiler already records (a second would break its trace)
    from torch.profiler import ProfilerActivity, profile

    if model is not None:
        model.zero_grad(set_to_none=True)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in held() if t is not None}
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    live = live_bytes(events_from_profiler(prof))
    return (sum(storages.values()) + (live.max() if len(live) else 0)) / 2**30


def between_steps(model: torch.nn.Module, optimizer, *batch: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that live from one step to the next: weights, buffers, gradients, the optimizer's
    state (AdamW's m and v) and the batch."""
    state = [v for per in optimizer.state.values() for v in per.values() if isinstance(v, torch.Tensor)]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return [*model.parameters(), *model.buffers(), *grads, *state, *batch]


def _rates(row: dict, cfg, batch_size: int, ctx: int, mode: str, peak: float | None) -> dict:
    """Throughput, achieved TFLOP/s and MFU on the launched median, and MFU on the graphed one."""
    flops = step_flops(cfg, batch_size, ctx, mode)
    achieved = flops / (row["median_ms"] / 1e3) / 1e12
    graphed = flops / (row.get("graphed_median_ms", float("nan")) / 1e3) / 1e12
    return {
        "tokens_per_s": batch_size * ctx / (row["median_ms"] / 1e3),
        "model_tflop_per_step": flops / 1e12,
        "achieved_tflops": achieved,
        "graphed_tflops": graphed,
        "peak_tflops": peak if peak is not None else float("nan"),
        "mfu": achieved / peak if peak else float("nan"),
        "graphed_mfu": graphed / peak if peak else float("nan"),
    }
