"""Where a step's time goes, kernel by kernel (op by op on a CPU), attributed to named ranges.

    python -m lmperf.studies.profile --size small --context-lengths 128,256 --modes forward,train_step \\
        --out results/profile/small.csv

One job profiles every (mode, context length) point of one model size, one point after another: a
profiled point costs a few seconds of steps, and each process, and each nsys session with its report
export, costs tens of seconds more, so the points share them.

The model runs with the annotated attention (ranges "attention scores", "softmax", "final matmul")
and ranges on the steps ("warmup step", "measured step") and phases ("forward", "backward",
"optimizer step"). Two profilers, one CSV schema:

- **nsys** (Nsight Systems, the default where it is installed and a GPU is present): the profiled
  steps of every point run in one child process under ``nsys profile --trace=cuda,nvtx``, each
  point inside an NVTX range of its own ("point train_step ctx512"); the kernel tables come from
  the report's ``nsys stats`` CSVs (lmperf.measure.nsys), cut at those ranges. The report
  ``<out stem>.nsys-rep`` (a dot in the stem an underscore: ``2_7B.nsys-rep``) is kept beside the
  CSV for the GUI; the pipeline does not track it.
- **torch.profiler** (anywhere, the smoke grid's path on a CPU): the profiled steps run in this
  process under torch.profiler; on a CPU the table counts operators' self time.

Either way the same step is also timed in this process with no profiler attached, so the profiler's
overhead is a measured number. Writes <out> (the kernel tables: size, mode, context, range, kernel,
category, instances, total and mean time, measured steps only) and <out stem>-timing.csv (the
timings and the profiler's view of the forward pass), one row per point there. A point that runs out
of memory is an ``oom`` row in both, one that fails otherwise an ``error`` row with the message,
and the job goes on to the next.
"""

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from lmperf import grid, ranges
from lmperf.measure import Budget, fingerprint, free_memory, measure, nsys, resolve_device, summarize_ms, write_rows
from lmperf.measure.kernels import in_measured_steps, kernel_table, spans_by_name
from lmperf.measure.phases import phase
from lmperf.model import make_optimizer
from lmperf.studies import choice_list, int_list, run_study
from lmperf.training import build_model, make_step, random_batch

log = logging.getLogger(__name__)

MODES = grid.PROFILED_MODES
PROFILERS = ("auto", "nsys", "torch")


class Failed(NamedTuple):
    """A point with no profile: ``status`` "oom" (out of memory) or "error", and the message."""

    status: str
    note: str

    @classmethod
    def of(cls, error: BaseException) -> "Failed":
        oom = isinstance(error, torch.OutOfMemoryError)
        message = str(error).splitlines()[0] if str(error) else ""
        return cls("oom" if oom else "error", message if oom else f"{type(error).__name__}: {message}")


# A point's outcome: its kernel table and timings, or why it has none.
Outcome = tuple[pd.DataFrame, dict] | Failed


def points(args) -> list[argparse.Namespace]:
    """This job's points, one set of arguments each (``mode``, ``context_length``), in the order they run."""
    return [
        argparse.Namespace(**{**vars(args), "mode": mode, "context_length": ctx})
        for mode in args.modes
        for ctx in args.context_lengths
    ]


def point_range(point) -> str:
    """The NVTX range around one point's profiled steps, which cuts the job's report into points."""
    return f"point {point.mode} ctx{point.context_length}"


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


def with_nsys(args, device: torch.device, out: Path, nsys_path: str) -> dict[str, Outcome]:
    """Every point's profiled steps in one child process under nsys, then each point's steps timed
    here without it. A point the child did not finish (it failed, or the child died) is a failed
    point; the others keep their tables."""
    report = out.with_name(out.stem.replace(".", "_") + ".nsys-rep")  # nsys names its report by the stem
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)  # an earlier run's report must not pass for this one's
    with tempfile.TemporaryDirectory() as tmp:
        captured = Path(tmp) / "captured.json"
        child = [
            *(sys.executable, "-m", "lmperf.studies.profile", "--size", args.size),
            *("--context-lengths", ",".join(map(str, args.context_lengths)), "--modes", ",".join(args.modes)),
            *("--batch-size", str(args.batch_size), "--warmup-steps", str(args.warmup_steps)),
            *("--measured-steps", str(args.measured_steps), "--device", str(device)),
            *("--out", str(out), "--capture-json", str(captured)),
        ]
        with phase("profile"):
            code = subprocess.run(nsys.profile_command(nsys_path, report, child, args.operator_ranges)).returncode
        results = json.loads(captured.read_text()) if captured.exists() else {}
    if not report.exists():
        raise RuntimeError(f"nsys wrote no report at {report} (the profiled process exited with code {code})")
    with phase("profile"):
        activities, nvtx_ranges = nsys.read_report(nsys_path, report)
    outcomes = {}
    for point in points(args):  # the child has exited: its GPU memory is free
        name = point_range(point)
        result = results.get(name, {"status": "error", "note": f"the profiled process exited with code {code} first"})
        if result["status"] != "ok":
            outcomes[name] = Failed(result["status"], result["note"])
            continue
        try:
            plain = timed(point, device, named_ranges=False)
            kernels, forward = point_tables(activities, nvtx_ranges, name, args.measured_steps)
        except RuntimeError as error:
            outcomes[name] = Failed.of(error)
            continue
        outcomes[name] = (
            kernels,
            {
                "step_ms": summarize_ms(plain)["median_ms"],
                "profiled_step_ms": summarize_ms(result["host_s"])["median_ms"],
                "profiler_forward_ms": forward,
                "profiler_forward_basis": "GPU span of the NVTX forward range",
            },
        )
    return outcomes


def point_tables(activities: pd.DataFrame, nvtx_ranges, name: str, steps: int) -> tuple[pd.DataFrame, float]:
    """One point's kernel table and forward span, from the work launched inside its range ``name``."""
    windows = [(start, end) for range_name, start, end in nvtx_ranges if range_name == name]
    if len(windows) != 1:
        raise RuntimeError(f"the nsys report holds {len(windows)} ranges named {name!r}, not one")
    ((start, end),) = windows
    inside = activities[(activities["launch"] >= start) & (activities["launch"] <= end)]
    spans = spans_by_name(r for r in nvtx_ranges if start <= r[1] <= end)
    if inside.empty or "measured step" not in spans:
        raise RuntimeError(
            f"nsys shows no kernels or no 'measured step' range in {name!r}: was it traced with --trace=cuda,nvtx?"
        )
    kernels = kernel_table(zip(inside["launch"], inside["name"], inside["end"] - inside["start"]), spans, steps)
    return kernels, forward_spans_ms(inside, spans, steps)


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
    """The child under nsys: each point's steps with ranges on, inside the point's own range. Their
    host times, or why a point failed, go to JSON after each point, so a child that dies keeps what
    it finished."""
    results = {}
    for point in points(args):
        with torch.cuda.nvtx.range(point_range(point)):
            try:
                results[point_range(point)] = {"status": "ok", "host_s": timed(point, device, named_ranges=True)}
            except RuntimeError as error:  # out of memory among them
                results[point_range(point)] = Failed.of(error)._asdict()
        Path(args.capture_json).write_text(json.dumps(results))


def with_torch_profiler_each(args, device: torch.device) -> dict[str, Outcome]:
    """Every point under torch.profiler, one after another in this process."""
    outcomes = {}
    for point in points(args):
        try:
            outcomes[point_range(point)] = with_torch_profiler(point, device)
        except RuntimeError as error:
            outcomes[point_range(point)] = Failed.of(error)
    return outcomes


def choose_profiler(requested: str, device: torch.device) -> str:
    if requested == "auto":
        return "nsys" if device.type == "cuda" and nsys.executable() else "torch"
    if requested == "nsys" and not nsys.executable():
        raise SystemExit("--profiler nsys: no nsys on PATH (on the GPU image: source .device/activate)")
    return requested


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True)
    p.add_argument("--context-lengths", type=int_list, required=True, help="comma-separated, e.g. 128,256")
    p.add_argument("--modes", type=choice_list(MODES), required=True, help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10)
    p.add_argument("--device", default="auto")
    p.add_argument("--profiler", choices=PROFILERS, default="auto")
    p.add_argument(
        "--operator-ranges",
        action="store_true",
        help="nsys: a range per PyTorch operator in the report (--pytorch=autograd-nvtx), for the Nsight GUI; "
        "the tables do not need them",
    )
    p.add_argument("--capture-json", help=argparse.SUPPRESS)  # set by the nsys path for its child
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    if args.capture_json:
        return capture(args, device)

    profiler = choose_profiler(args.profiler, device)
    out = Path(args.out)
    if profiler == "nsys":
        outcomes = with_nsys(args, device, out, nsys.executable())
    else:
        outcomes = with_torch_profiler_each(args, device)
    env = fingerprint(device)
    kernel_rows, timing_rows = [], []
    for point in points(args):
        base = {
            "study": "profile",
            "size": args.size,
            "context_length": point.context_length,
            "mode": point.mode,
            "batch_size": args.batch_size,
            "measured_steps": args.measured_steps,
            "profiler": "nsys" if profiler == "nsys" else "torch.profiler",
        }
        outcome = outcomes[point_range(point)]
        if isinstance(outcome, Failed):
            row = {**base, "status": outcome.status, "note": outcome.note, **env}
            kernel_rows.append(row)
            timing_rows.append(row)
            log.info(f"{args.size} ctx {point.context_length} {point.mode}: {outcome.status} ({outcome.note})")
            continue
        kernels, timing = outcome
        timing["kernel_forward_ms"] = kernel_forward_ms(kernels, args.measured_steps)
        kernel_rows += [{**base, **r, "status": "ok", "note": "", **env} for r in kernels.to_dict("records")]
        timing_rows.append({**base, **timing, "status": "ok", "note": "", **env})
        log.info(
            f"{args.size} ctx {point.context_length} {point.mode} ({base['profiler']}): {timing['step_ms']:.2f} ms, "
            f"profiled {timing['profiled_step_ms']:.2f} ms, "
            f"forward per profiler {timing['profiler_forward_ms']:.2f} ms, {len(kernels)} kernel rows"
        )
    write_rows(timing_rows, f"{out.with_suffix('')}-timing.csv", cost=False)
    write_rows(kernel_rows, out)  # the job's main output, last: its cost split is written beside it


if __name__ == "__main__":
    child = any(a.split("=")[0] == "--capture-json" for a in sys.argv)
    run_study(main, leave_at_once=not child)  # the child under nsys ends as usual
