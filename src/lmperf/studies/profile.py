"""Where a step's time goes, kernel by kernel (op by op on a CPU), attributed to named ranges.

    python -m lmperf.studies.profile --size small --context-length 256 --mode forward \\
        --out results/profile/small/forward-ctx256.csv

The model runs with the annotated attention (ranges "attention scores", "softmax", "final matmul")
and ranges on the steps ("warmup step", "measured step") and phases ("forward", "backward",
"optimizer step"). Two profilers, one CSV schema:

- **nsys** (Nsight Systems, the default where it is installed and a GPU is present): the profiled
  steps run in a child process under ``nsys profile --trace=cuda,nvtx``; the kernel table comes
  from the report's ``nsys stats`` CSVs (lmperf.measure.nsys). The report ``<out stem>.nsys-rep``
  is kept beside the CSV for the GUI; the pipeline does not track it.
- **torch.profiler** (anywhere, the smoke grid's path on a CPU): the profiled steps run in this
  process under torch.profiler; on a CPU the table counts operators' self time.

Either way the same step is also timed in this process with no profiler attached, so the profiler's
overhead is a measured number. Writes <out> (the kernel table: range, kernel, category, instances,
total and mean time, measured steps only) and <out stem>-timing.csv (the timings and the profiler's
view of the forward pass).
"""

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

from lmperf import grid, ranges
from lmperf.log import to_stderr
from lmperf.measure import Budget, fingerprint, free_memory, measure, nsys, resolve_device, summarize_ms, write_rows
from lmperf.measure.kernels import in_measured_steps, kernel_table, spans_by_name
from lmperf.measure.phases import phase
from lmperf.model import make_optimizer
from lmperf.training import build_model, make_step, random_batch

log = logging.getLogger(__name__)

MODES = grid.PROFILED_MODES
PROFILERS = ("auto", "nsys", "torch")


def build_step(args, device: torch.device):
    """The model (annotated attention), one random batch and the step of ``args.mode``."""
    model = build_model(args.size, args.context_length, device, attention="annotated")
    optimizer = make_optimizer("lmperf", model.parameters())
    tokens, targets = random_batch(model.cfg.vocab_size, args.batch_size, args.context_length, device)
    return make_step(args.mode, model, optimizer, tokens, targets, "fp32", device)


def timed(args, device: torch.device, named_ranges: bool) -> list[float]:
    """Host seconds of each measured step, with the named ranges on or off. A step that runs out of
    memory raises it: measure() drops such a step, and the caller makes it the point's oom row."""
    step = build_step(args, device)
    ranges.enable(named_ranges)
    try:
        exactly = Budget(args.measured_steps, max_steps=args.measured_steps)  # the kernel table divides by this count
        timings = measure({"step": step}, device, args.warmup_steps, exactly)["step"]
        if timings.error is not None:
            raise timings.error
        return timings.host_s
    finally:
        ranges.enable(False)
        del step
        free_memory(device)


def forward_spans_ms(activities: pd.DataFrame, spans, steps: int) -> float:
    """Mean over measured steps of the forward range's GPU span: from the first kernel launched in
    it starting to the last one ending (Nsight's "projected" range), idle gaps included."""
    total = 0.0
    for s, e in in_measured_steps(spans, "forward"):
        inside = activities[(activities["launch"] >= s) & (activities["launch"] <= e)]
        if len(inside):
            total += inside["end"].max() - inside["start"].min()
    return total / steps / 1e3


def with_nsys(args, device: torch.device, out: Path, nsys_path: str) -> tuple[pd.DataFrame, dict]:
    """Profiled steps in a child process under nsys, then the same steps timed here without it."""
    report = out.with_suffix(".nsys-rep")
    with tempfile.TemporaryDirectory() as tmp:
        captured = Path(tmp) / "captured.json"
        child = [
            sys.executable,
            "-m",
            "lmperf.studies.profile",
            "--size",
            args.size,
            "--context-length",
            str(args.context_length),
            "--mode",
            args.mode,
            "--batch-size",
            str(args.batch_size),
            "--warmup-steps",
            str(args.warmup_steps),
            "--measured-steps",
            str(args.measured_steps),
            "--device",
            str(device),
            "--out",
            str(out),
            "--capture-json",
            str(captured),
        ]
        with phase("profile"):
            subprocess.run(nsys.profile_command(nsys_path, report, child), check=True)
        result = json.loads(captured.read_text())
    if result["status"] == "oom":
        raise torch.OutOfMemoryError(result["note"])
    plain = timed(args, device, named_ranges=False)  # after the child: this process holds no GPU memory then
    with phase("profile"):
        activities, nvtx_ranges = nsys.read_report(nsys_path, report)
    spans = spans_by_name(nvtx_ranges)
    if activities.empty or "measured step" not in spans:
        raise RuntimeError(
            f"nsys stats of {report} show no kernels or no 'measured step' range: was it traced with --trace=cuda,nvtx?"
        )
    kernels = kernel_table(
        zip(activities["launch"], activities["name"], (activities["end"] - activities["start"])),
        spans,
        args.measured_steps,
    )
    forward = forward_spans_ms(activities, spans, args.measured_steps)
    return kernels, {
        "step_ms": summarize_ms(plain)["median_ms"],
        "profiled_step_ms": summarize_ms(result["host_s"])["median_ms"],
        "profiler_forward_ms": forward,
        "profiler_forward_basis": "GPU span of the NVTX forward range",
    }


def with_torch_profiler(args, device: torch.device) -> tuple[pd.DataFrame, dict]:
    """The same steps timed without a profiler, then again under torch.profiler, in this process."""
    from torch.profiler import ProfilerActivity, profile

    plain = timed(args, device, named_ranges=False)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        profiled = timed(args, device, named_ranges=True)
    events = list(prof.events())
    spans = spans_by_name((e.name, e.time_range.start, e.time_range.end) for e in events)
    on_gpu = device.type == "cuda"
    launches = (
        (e.time_range.start, name, us)
        for e in events
        if e.device_type == torch.autograd.DeviceType.CPU
        and e.name not in spans
        and not e.name.startswith("ProfilerStep")
        for name, us in ([(k.name, k.duration) for k in e.kernels] if on_gpu else [(e.name, e.self_cpu_time_total)])
        if us > 0
    )
    kernels = kernel_table(launches, spans, args.measured_steps)
    if on_gpu:  # torch.profiler gives kernels durations, not start times: their sum is the forward time
        forward, basis = kernel_forward_ms(kernels, args.measured_steps), "kernel time under the forward range"
    else:
        forward = sum(e - s for s, e in in_measured_steps(spans, "forward")) / args.measured_steps / 1e3
        basis = "host time of the forward range"
    return kernels, {
        "step_ms": summarize_ms(plain)["median_ms"],
        "profiled_step_ms": summarize_ms(profiled)["median_ms"],
        "profiler_forward_ms": forward,
        "profiler_forward_basis": basis,
    }


def kernel_forward_ms(kernels: pd.DataFrame, steps: int) -> float:
    """Kernel (or operator) time under the forward range and its attention stages, per step."""
    return kernels.loc[kernels["range"].str.startswith("forward"), "total_ms"].sum() / steps


def capture(args, device: torch.device) -> None:
    """The child under nsys: the steps with ranges on; their host times (or the OOM) go to JSON."""
    try:
        result = {"status": "ok", "host_s": timed(args, device, named_ranges=True)}
    except torch.OutOfMemoryError as error:
        result = {"status": "oom", "note": str(error).splitlines()[0]}
    Path(args.capture_json).write_text(json.dumps(result))


def choose_profiler(requested: str, device: torch.device) -> str:
    if requested == "auto":
        return "nsys" if device.type == "cuda" and nsys.executable() else "torch"
    if requested == "nsys" and not nsys.executable():
        raise SystemExit("--profiler nsys: no nsys on PATH (on the GPU image: source .device/activate)")
    return requested


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10)
    p.add_argument("--device", default="auto")
    p.add_argument("--profiler", choices=PROFILERS, default="auto")
    p.add_argument("--capture-json", help=argparse.SUPPRESS)  # set by the nsys path for its child
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    if args.capture_json:
        return capture(args, device)

    profiler = choose_profiler(args.profiler, device)
    out = Path(args.out)
    base = {
        "study": "profile",
        "size": args.size,
        "context_length": args.context_length,
        "mode": args.mode,
        "batch_size": args.batch_size,
        "measured_steps": args.measured_steps,
        "profiler": "nsys" if profiler == "nsys" else "torch.profiler",
    }
    try:
        if profiler == "nsys":
            kernels, timing = with_nsys(args, device, out, nsys.executable())
        else:
            kernels, timing = with_torch_profiler(args, device)
    except torch.OutOfMemoryError as error:
        row = {**base, "status": "oom", "note": str(error).splitlines()[0], **fingerprint(device)}
        write_rows([row], out)
        write_rows([row], f"{out.with_suffix('')}-timing.csv", cost=False)
        return
    env = fingerprint(device)
    timing["kernel_forward_ms"] = kernel_forward_ms(kernels, args.measured_steps)
    write_rows([{**base, **r, "status": "ok", "note": "", **env} for r in kernels.to_dict("records")], out)
    write_rows([{**base, **timing, "status": "ok", "note": "", **env}], f"{out.with_suffix('')}-timing.csv", cost=False)
    log.info(
        f"{args.size} ctx {args.context_length} {args.mode} ({base['profiler']}): {timing['step_ms']:.2f} ms, "
        f"profiled {timing['profiled_step_ms']:.2f} ms, forward per profiler {timing['profiler_forward_ms']:.2f} ms, "
        f"{len(kernels)} kernel rows"
    )


if __name__ == "__main__":
    to_stderr()
    main()
