"""Time forward, forward+backward and full train steps of the Transformer LM.

The method follows the CS336 handout: build the model and one random batch, run ``warmup_steps``
untimed steps, then ``measured_steps`` timed ones, each bracketed by ``timeit.default_timer`` with
``torch.cuda.synchronize()`` before the clock is read. The same steps are also bracketed by CUDA
events, so the host timer can be checked against the device's own clock. Python's garbage
collector is paused while timing, as ``timeit`` does, so a collection never lands inside a step.

One process sweeps several context lengths with one model: gradients and optimizer state are
dropped between contexts, so each context starts from the same memory state.
"""

import gc
import timeit
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass

import torch

from lmperf.attention import get_attention
from lmperf.measure.env import fingerprint
from lmperf.measure.flops import MODES, peak_tflops, step_flops
from lmperf.measure.stats import summarize_ms
from lmperf.model import TransformerLM, count_parameters, cross_entropy, make_optimizer, model_config
from lmperf.ranges import profiled_range

PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class BenchmarkSpec:
    size: str
    context_lengths: tuple[int, ...]
    batch_size: int = 4
    precision: str = "fp32"
    compile: bool = False
    attention: str = "naive"
    optimizer: str = "lmperf"
    warmup_steps: int = 5
    measured_steps: int = 10

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.warmup_steps < 0 or self.measured_steps < 1:
            raise ValueError("warmup_steps must be >= 0 and measured_steps >= 1")
        if not self.context_lengths or min(self.context_lengths) < 1:
            raise ValueError(f"context_lengths must be positive, got {self.context_lengths}")


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def autocast_context(precision: str, device: torch.device):
    """bf16 autocast, or a no-op context for full fp32."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StepTimes:
    host_s: list[float]  # timeit.default_timer per measured step, synchronized
    event_s: list[float]  # CUDA-event time of the same steps (empty on CPU)
    first_step_s: float  # the very first call, warm-up or not: includes compilation and lazy init


def time_once(step: Callable[[], None], device: torch.device) -> tuple[float, float | None]:
    """Host seconds of one synchronized step, and the CUDA-event seconds of the same step (None on CPU)."""
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


def time_steps(step: Callable[[], None], warmup_steps: int, measured_steps: int, device: torch.device) -> StepTimes:
    """Run ``step`` warmup + measured times, synchronizing after each; return the measured times."""
    host, events, first = [], [], None
    gc.collect()
    gc.disable()
    try:
        for i in range(warmup_steps + measured_steps):
            measured = i >= warmup_steps
            with profiled_range("measured step" if measured else "warmup step"):
                elapsed, event = time_once(step, device)
            first = elapsed if first is None else first
            if measured:
                host.append(elapsed)
                if event is not None:
                    events.append(event)
    finally:
        gc.enable()
    return StepTimes(host, events, first)


def make_step(mode: str, model: torch.nn.Module, optimizer, tokens, targets, precision: str, device) -> Callable[[], None]:
    """The work of one step. 'forward' is inference (no autograd graph kept)."""
    amp = lambda: autocast_context(precision, device)  # noqa: E731 - a fresh context per step

    def forward():
        with torch.no_grad(), amp(), profiled_range("forward"):
            model(tokens)

    def forward_and_loss():
        with amp(), profiled_range("forward"):
            return cross_entropy(model(tokens), targets)

    def forward_backward():
        model.zero_grad(set_to_none=True)
        loss = forward_and_loss()
        with profiled_range("backward"):
            loss.backward()

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = forward_and_loss()
        with profiled_range("backward"):
            loss.backward()
        with profiled_range("optimizer step"):
            optimizer.step()

    return {"forward": forward, "forward_backward": forward_backward, "train_step": train_step}[mode]


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_benchmark(spec: BenchmarkSpec, modes=MODES, device: torch.device | None = None) -> list[dict]:
    """One tidy row per (context length, mode); out-of-memory becomes a row with status 'oom'."""
    device = device or resolve_device()
    cfg = model_config(spec.size, max(spec.context_lengths))
    env = fingerprint(device)
    peak = peak_tflops(env["device_name"], spec.precision)
    config = {k: v for k, v in asdict(spec).items() if k != "context_lengths"}
    base = {"study": "e2e", **config, "compile": "compiled" if spec.compile else "eager", "params": None,
            "device": str(device), "matmul_precision": torch.get_float32_matmul_precision()}

    try:
        model = TransformerLM(cfg, attention=get_attention(spec.attention), device=device)
    except torch.OutOfMemoryError as error:
        note = f"model construction: {str(error).splitlines()[0]}"
        _free(device)
        return [{**base, "context_length": c, "mode": m, "status": "oom", "note": note, **env}
                for c in spec.context_lengths for m in modes]
    base["params"] = count_parameters(model)
    print(f"built {spec.size} ({base['params']:,} parameters) on {device}", flush=True)
    if spec.compile:
        model.compile_blocks()
    optimizer = make_optimizer(spec.optimizer, model.parameters())
    generator = torch.Generator(device="cpu").manual_seed(0)

    rows = []
    for ctx in spec.context_lengths:
        shape = (spec.batch_size, ctx)
        tokens = torch.randint(0, cfg.vocab_size, shape, generator=generator).to(device)
        targets = torch.randint(0, cfg.vocab_size, shape, generator=generator).to(device)
        for mode in modes:
            row = {**base, "context_length": ctx, "mode": mode, "status": "ok", "note": ""}
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            try:
                step = make_step(mode, model, optimizer, tokens, targets, spec.precision, device)
                times = time_steps(step, spec.warmup_steps, spec.measured_steps, device)
            except torch.OutOfMemoryError as error:
                row.update(status="oom", note=str(error).splitlines()[0])
            else:
                row.update(_metrics(times, cfg, spec.batch_size, ctx, mode, peak, device))
            rows.append({**row, **env})
            print(f"ctx {ctx:>6} {mode:>16} {row['status']:>4} {row.get('mean_ms', float('nan')):10.3f} ms {row['note']}", flush=True)
            del step
            model.zero_grad(set_to_none=True)
            _free(device)
        optimizer.state.clear()
        del tokens, targets
        _free(device)
    return rows


def _metrics(times: StepTimes, cfg, batch_size: int, ctx: int, mode: str, peak: float | None, device) -> dict:
    stats = summarize_ms(times.host_s)
    flops = step_flops(cfg, batch_size, ctx, mode)
    achieved = flops / (stats["mean_ms"] / 1e3) / 1e12
    return {
        **stats,
        "event_mean_ms": summarize_ms(times.event_s)["mean_ms"] if times.event_s else float("nan"),
        "first_step_ms": times.first_step_s * 1e3,
        "tokens_per_s": batch_size * ctx / (stats["mean_ms"] / 1e3),
        "model_tflop_per_step": flops / 1e12,
        "achieved_tflops": achieved,
        "peak_tflops": peak if peak is not None else float("nan"),
        "mfu": achieved / peak if peak else float("nan"),
        "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan"),
        "step_times_ms": ";".join(f"{t * 1e3:.4f}" for t in times.host_s),
    }
