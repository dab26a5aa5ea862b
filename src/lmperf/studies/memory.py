"""Memory of one forward pass or one full training step, recorded allocation by allocation.

    python -m lmperf.studies.memory --size 2.7B --context-length 128 --mode train_step --precision fp32 \\
        --out results/memory/fp32-train_step-ctx128.csv

On CUDA: torch.cuda.memory._record_memory_history(max_entries=1_000_000) from before the model is
built to the end of the step, then the snapshot (kept as a pickle only with --pickle) and its
interactive HTML (torch.cuda._memory_viz.trace_plot). Elsewhere: torch.profiler(profile_memory=True),
turned into the same allocation events; the rows say which profiler ran.

Phase boundaries (model built, after forward, after backward, after the optimizer step) are
recorded as positions in the allocation trace and as allocator readings, so the timeline can be
labelled. Writes <out> (one summary row), <out stem>-allocations.csv (the top 10% of allocations by
size and the frame of our code that made each), <out stem>-phases.csv, <out stem>.html and the
timeline PNG (--figure).
"""

import argparse
import pickle
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

from lmperf.measure import fingerprint, resolve_device, write_rows
from lmperf.memory_trace import (events_before, events_from_profiler, events_from_snapshot, largest_allocations,
                                 live_bytes)
from lmperf.measure.rows import atomic_path, write_csv_atomic
from lmperf.model import count_parameters, make_optimizer, model_config
from lmperf.training import build_model, make_step, random_batch

MODES = ("forward", "train_step")
BATCH = 4


class Recorder:
    """Where each phase ends: the allocation-trace length and the allocator's reading."""

    def __init__(self, device: torch.device):
        self.device, self.phases = device, []

    @contextmanager
    def phase(self, name: str):
        """A phase of lmperf.training's step; its end is marked as "after <name>"."""
        yield
        self.mark(f"after {name}")

    def mark(self, phase: str) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            trace = torch.cuda.memory._snapshot()["device_traces"][self.device.index or 0]
            self.phases.append({"phase": phase, "trace_position": len(trace),  # in trace entries, for now
                                "allocated_mib": torch.cuda.memory_allocated(self.device) / 2**20})
        else:  # a zero-length range whose start time places the boundary among the profiler's events
            with torch.profiler.record_function(f"boundary: {phase}"):
                pass
            self.phases.append({"phase": phase, "trace_position": None, "allocated_mib": None})


def run_step(size: str, ctx: int, mode: str, precision: str, device: torch.device, recorder: Recorder) -> int:
    """Build the model and run one step, marking the phases; returns the parameter count."""
    model = build_model(size, ctx, device)
    optimizer = make_optimizer("lmperf", model.parameters()) if mode == "train_step" else None
    tokens, targets = random_batch(model.cfg.vocab_size, BATCH, ctx, device)
    recorder.mark("model built")
    make_step(mode, model, optimizer, tokens, targets, precision, device, phase=recorder.phase)()
    return count_parameters(model)


def record_cuda(args, device, recorder):
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    status, note, params = "ok", "", None
    try:
        params = run_step(args.size, args.context_length, args.mode, args.precision, device, recorder)
    except torch.OutOfMemoryError as error:
        status, note = "oom", str(error).splitlines()[0]
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = {"allocator_peak_mib": torch.cuda.max_memory_allocated(device) / 2**20}
    events = events_from_snapshot(snapshot, device.index or 0)
    for phase in recorder.phases:
        phase["trace_position"] = events_before(events, phase["trace_position"])
    return events, snapshot, stats, status, note, params


def record_profiler(args, device, recorder):
    from torch.profiler import ProfilerActivity, profile

    status, note, params = "ok", "", None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        params = run_step(args.size, args.context_length, args.mode, args.precision, device, recorder)
    function_events = list(prof.events())
    events = events_from_profiler(function_events)
    starts = {e.name.removeprefix("boundary: "): e.time_range.start for e in function_events if e.name.startswith("boundary: ")}
    for phase in recorder.phases:  # the number of memory events before the boundary's start
        phase["trace_position"] = int((events["start_us"] < starts[phase["phase"]]).sum())
    return events, None, {"allocator_peak_mib": None}, status, note, params


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="2.7B")
    p.add_argument("--context-length", type=int, default=128)
    p.add_argument("--mode", choices=MODES, default="train_step")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--device", default="auto")
    p.add_argument("--pickle", help="also keep the raw CUDA snapshot here (large; never committed)")
    p.add_argument("--figure", help="the timeline PNG (default: <out stem>.png)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    recorder = Recorder(device)
    record = record_cuda if device.type == "cuda" else record_profiler
    events, snapshot, stats, status, note, params = record(args, device, recorder)

    out = Path(args.out)
    stem = out.with_suffix("")
    live = live_bytes(events)
    phases = pd.DataFrame(recorder.phases, columns=["phase", "trace_position", "allocated_mib"])
    phases["trace_mib"] = [live.iloc[int(pos) - 1] / 2**20 if pos and len(live) >= pos else 0.0
                           for pos in phases["trace_position"]]
    cfg = model_config(args.size, args.context_length)
    residual = BATCH * args.context_length * cfg.d_model * 4
    allocations = largest_allocations(events)
    at_phase = dict(zip(phases["phase"], phases["allocated_mib"].where(phases["allocated_mib"].notna(), phases["trace_mib"])))
    row = {
        "study": "memory", "size": args.size, "context_length": args.context_length, "mode": args.mode,
        "precision": args.precision, "batch_size": BATCH, "params": params,
        "profiler": "cuda_snapshot" if snapshot is not None else "torch_profiler",
        "trace_peak_mib": live.max() / 2**20 if len(live) else 0.0, **stats,
        **{f"{phase.replace(' ', '_')}_mib": value for phase, value in at_phase.items()},
        "residual_stream_mib": residual / 2**20,
        "residual_stream_seen": bool((events["size"] == residual).any()),
        "allocations": int((events["action"] == "alloc").sum()), "status": status, "note": note,
        **fingerprint(device),
    }
    write_csv_atomic(allocations.assign(mode=args.mode, precision=args.precision, context_length=args.context_length),
                     f"{stem}-allocations.csv")
    write_csv_atomic(phases.assign(mode=args.mode, precision=args.precision, context_length=args.context_length),
                     f"{stem}-phases.csv")
    from lmperf.report.memory_figures import timeline

    timeline(events, phases, args.figure or f"{stem}.png", title=f"{args.size}, {args.precision}, {args.mode}, ctx {args.context_length}")
    if snapshot is not None:
        from torch.cuda._memory_viz import trace_plot

        with atomic_path(f"{stem}.html") as tmp:
            tmp.write_text(trace_plot(snapshot))
        if args.pickle:
            with atomic_path(args.pickle) as tmp, open(tmp, "wb") as f:
                pickle.dump(snapshot, f)
    else:
        with atomic_path(f"{stem}.html") as tmp:
            tmp.write_text("<p>The interactive view needs a CUDA memory snapshot; this run used torch.profiler.</p>\n")
    write_rows([row], out)
    print(f"{args.size} {args.precision} {args.mode} ctx {args.context_length}: {status}, "
          f"trace peak {row['trace_peak_mib']:.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
