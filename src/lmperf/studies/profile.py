"""Where a step's time goes, kernel by kernel (op by op on a CPU), attributed to named ranges.

    python -m lmperf.studies.profile --size small --context-length 256 --mode forward \\
        --out results/profile/small/forward-ctx256.csv

One process: the model with the annotated attention (ranges "attention scores", "softmax",
"final matmul"), profiler ranges on ("warmup step", "measured step", "forward", "backward",
"optimizer step"). The step is first timed without any profiler, then timed again under
torch.profiler, so the profiler's overhead is a measured number. Each kernel (on a GPU) or leaf
operator (on a CPU) of the measured steps becomes a row of the kernel table: name, category
(lmperf.measure.kernels.categorize), the innermost named range it ran under, instances, total and
mean time. Writes <out> (the kernel table) and <out stem>-timing.csv (the two timings and the
summed range times).

Nsight Systems is the issue's first choice of profiler; this module is the torch.profiler path,
which runs anywhere (the smoke grid exercises it on the CPU).
"""

import argparse
import bisect
from collections import defaultdict
from pathlib import Path

import pandas as pd
import torch

from lmperf import ranges
from lmperf.attention import get_attention
from lmperf.measure import fingerprint, write_rows
from lmperf.measure.harness import make_step, resolve_device, time_steps
from lmperf.measure.kernels import categorize
from lmperf.model import TransformerLM, make_optimizer, model_config

STEP_RANGES = ("measured step", "warmup step")
PHASE_RANGES = ("forward", "backward", "optimizer step")
ATTENTION_RANGES = ("attention scores", "softmax", "final matmul")
MODES = ("forward", "train_step")


def _containing(spans: dict, t: float, names) -> str | None:
    """The innermost (latest-starting) range among ``names`` whose span contains time t.

    ``spans[name]`` is a (starts, ends) pair sorted by start; ranges of one name never overlap each
    other, so only the last one starting at or before t can contain it (a bisection, not a scan:
    a profiled xl step has thousands of ranges and tens of thousands of operators).
    """
    best = None
    for name in names:
        starts, ends = spans.get(name, ((), ()))
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= ends[i] and (best is None or starts[i] > best[0]):
            best = (starts[i], name)
    return best[1] if best else None


def kernel_rows(function_events, steps: int, on_gpu: bool) -> pd.DataFrame:
    """Aggregate the measured steps' work by (range, name): on a GPU each operator's own kernels and
    their device time; on a CPU each operator's self time (its children's time is theirs)."""
    by_name = defaultdict(list)
    for e in function_events:
        if e.name in (*STEP_RANGES, *PHASE_RANGES, *ATTENTION_RANGES):
            by_name[e.name].append((e.time_range.start, e.time_range.end))
    spans = {name: tuple(zip(*sorted(pairs))) for name, pairs in by_name.items()}
    totals = defaultdict(lambda: [0, 0.0])
    for e in function_events:
        if e.name in spans or e.device_type != torch.autograd.DeviceType.CPU or e.name.startswith("ProfilerStep"):
            continue
        launched = [(k.name, k.duration) for k in e.kernels] if on_gpu else [(e.name, e.self_cpu_time_total)]
        if not launched or not any(us > 0 for _, us in launched):
            continue
        t = e.time_range.start
        if _containing(spans, t, STEP_RANGES) != "measured step":
            continue
        phase = _containing(spans, t, PHASE_RANGES) or "other"
        sub = _containing(spans, t, ATTENTION_RANGES) if phase == "forward" else None
        where = f"{phase}/{sub}" if sub else phase
        for name, us in launched:
            totals[(where, name)][0] += 1
            totals[(where, name)][1] += us
    rows = [{"range": where, "kernel": name[:200], "category": categorize(name), "instances": n,
             "instances_per_step": n / steps, "total_ms": us / 1e3, "mean_us": us / n}
            for (where, name), (n, us) in totals.items()]
    frame = pd.DataFrame(rows, columns=["range", "kernel", "category", "instances", "instances_per_step",
                                        "total_ms", "mean_us"])
    return frame.sort_values("total_ms", ascending=False).reset_index(drop=True)


def range_totals_ms(function_events, name: str) -> float:
    """Summed wall time of a named range within the measured steps (host view)."""
    measured = [(e.time_range.start, e.time_range.end) for e in function_events if e.name == "measured step"]
    return sum((e.time_range.end - e.time_range.start) / 1e3 for e in function_events
               if e.name == name and any(s <= e.time_range.start <= t for s, t in measured))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    from torch.profiler import ProfilerActivity, profile

    device = resolve_device(args.device)
    env = fingerprint(device)
    base = {"study": "profile", "size": args.size, "context_length": args.context_length, "mode": args.mode,
            "batch_size": args.batch_size, "measured_steps": args.measured_steps, "profiler": "torch.profiler"}
    out = Path(args.out)
    try:
        cfg = model_config(args.size, args.context_length)
        model = TransformerLM(cfg, attention=get_attention("annotated"), device=device)
        optimizer = make_optimizer("lmperf", model.parameters())
        generator = torch.Generator().manual_seed(0)
        tokens, targets = (torch.randint(0, cfg.vocab_size, (args.batch_size, args.context_length),
                                         generator=generator).to(device) for _ in range(2))
        step = make_step(args.mode, model, optimizer, tokens, targets, "fp32", device)
        plain = time_steps(step, args.warmup_steps, args.measured_steps, device)
        ranges.enable()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            profiled = time_steps(step, args.warmup_steps, args.measured_steps, device)
        ranges.enable(False)
    except torch.OutOfMemoryError as error:
        row = {**base, "status": "oom", "note": str(error).splitlines()[0], **env}
        write_rows([row], out)
        write_rows([row], f"{out.with_suffix('')}-timing.csv")
        return
    events = list(prof.events())
    kernels = kernel_rows(events, args.measured_steps, on_gpu=device.type == "cuda")
    write_rows([{**base, **r, "status": "ok", "note": "", **env} for r in kernels.to_dict("records")], out)
    mean = lambda xs: sum(xs) / len(xs) * 1e3  # noqa: E731  (ms)
    timing = {**base, "step_ms": mean(plain.host_s), "profiled_step_ms": mean(profiled.host_s),
              "forward_range_ms": range_totals_ms(events, "forward") / args.measured_steps,
              "kernel_forward_ms": kernels.loc[kernels["range"].str.startswith("forward"), "total_ms"].sum()
              / args.measured_steps,
              "status": "ok", "note": "", **env}
    write_rows([timing], f"{out.with_suffix('')}-timing.csv")
    print(f"{args.size} ctx {args.context_length} {args.mode}: {timing['step_ms']:.2f} ms, "
          f"profiled {timing['profiled_step_ms']:.2f} ms, {len(kernels)} kernel rows", flush=True)


if __name__ == "__main__":
    main()
