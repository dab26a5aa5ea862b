"""Memory of forward passes or training steps, recorded allocation by allocation, first step and steady state.

    python -m lmperf.studies.memory --size 2.7B --context-length 128 --mode train_step --precision fp32 \\
        --steps 3 --out results/memory/fp32-train_step-ctx128.csv

The first train step of a fresh model is not the steady state: AdamW creates its state after the
first backward. So ``--steps`` steps run back to back (at least 2) and the summary has one row for
the first step and one for the last (``state``: first, steady), each with its peak from the trace
and from the allocator (reset at the step's start), the memory at each phase boundary, and at the
peak the live bytes split into weights, optimizer state, gradients, and activations and
temporaries (``lmperf.memory_trace.attribute``).

On CUDA: torch.cuda.memory._record_memory_history(max_entries=1_000_000) from before the model is
built to the end of the last step, then the snapshot (kept as a pickle only with --pickle, and as
torch.cuda._memory_viz's interactive HTML only with --html: both run to hundreds of MB).
Elsewhere: torch.profiler(profile_memory=True), turned into the same allocation events; the rows say which profiler ran.

Writes data only: <out> (the two summary rows), <out stem>-allocations.csv (the top 10% of
allocations by size, what each is and the frame of our code that made it), <out stem>-phases.csv,
and <out stem>-timeline.csv (live MiB per category along the trace). The timeline
figure is drawn from the CSVs by lmperf.report.memory_figures.
"""

import argparse
import logging
import pickle
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

from lmperf import grid
from lmperf.measure import fingerprint, resolve_device, synchronize, write_rows
from lmperf.measure.rows import atomic_path, write_csv_atomic
from lmperf.memory_trace import (
    CATEGORIES,
    at_peak,
    attribute,
    events_before,
    events_from_profiler,
    events_from_snapshot,
    label_stages,
    largest_allocations,
    live_bytes,
    profiler_events,
    stage_of,
    timeline_series,
)
from lmperf.model import count_parameters, make_optimizer, model_config
from lmperf.studies import run_study
from lmperf.training import build_model, make_step, random_batch

log = logging.getLogger(__name__)

MODES = grid.PROFILED_MODES
BATCH = 4
STAGES = ("forward", "backward", "optimizer step")


class Recorder:
    """Where each phase ends (the allocation-trace length and the allocator's reading), and each
    step's allocator peak."""

    def __init__(self, device: torch.device):
        self.device, self.phases, self.step, self.allocator_peaks = device, [], 0, {}

    @contextmanager
    def phase(self, name: str):
        """A phase of lmperf.training's step; its end is marked as "step <n>: after <name>"."""
        yield
        self.mark(f"step {self.step}: after {name}")

    def begin_step(self, step: int) -> None:
        self.step = step
        if self.device.type == "cuda":
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)

    def end_step(self) -> None:
        if self.device.type == "cuda":
            synchronize(self.device)
            self.allocator_peaks[self.step] = torch.cuda.max_memory_allocated(self.device) / 2**20

    def mark(self, phase: str) -> None:
        if self.device.type == "cuda":
            synchronize(self.device)
            trace = torch.cuda.memory._snapshot()["device_traces"][self.device.index or 0]
            self.phases.append(
                {
                    "phase": phase,
                    "trace_position": len(trace),  # in trace entries, for now
                    "allocated_mib": torch.cuda.memory_allocated(self.device) / 2**20,
                }
            )
        else:  # a zero-length range whose start time places the boundary among the profiler's events
            with torch.profiler.record_function(f"boundary: {phase}"):
                pass
            self.phases.append({"phase": phase, "trace_position": None, "allocated_mib": None})


def run_steps(
    size: str, ctx: int, mode: str, precision: str, steps: int, device: torch.device, recorder: Recorder
) -> torch.nn.Module:
    """Build the model and run ``steps`` steps back to back, marking the phases; returns the model."""
    model = build_model(size, ctx, device)
    optimizer = make_optimizer("lmperf", model.parameters()) if mode == "train_step" else None
    tokens, targets = random_batch(model.cfg.vocab_size, BATCH, ctx, device)
    recorder.mark("model built")
    step = make_step(mode, model, optimizer, tokens, targets, precision, device, phase=recorder.phase)
    for n in range(1, steps + 1):
        recorder.begin_step(n)
        step()
        recorder.end_step()
    return model


def record_cuda(args, device, recorder):
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    status, note, model = "ok", "", None
    try:
        model = run_steps(args.size, args.context_length, args.mode, args.precision, args.steps, device, recorder)
    except torch.OutOfMemoryError as error:
        status, note = "oom", str(error).splitlines()[0]
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = events_from_snapshot(snapshot, device.index or 0)
    for phase in recorder.phases:
        phase["trace_position"] = events_before(events, phase["trace_position"])
    return events, snapshot, status, note, model


def record_profiler(args, device, recorder):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = run_steps(args.size, args.context_length, args.mode, args.precision, args.steps, device, recorder)
    events = events_from_profiler(prof)
    starts = {
        e.name.removeprefix("boundary: "): e.start_time_ns
        for e in profiler_events(prof)
        if e.name.startswith("boundary: ")
    }
    for phase in recorder.phases:  # the number of memory events before the boundary's start
        phase["trace_position"] = int((events["start_ns"] < starts[phase["phase"]]).sum())
    return events, None, "ok", "", model


def step_rows(
    events: pd.DataFrame, live: pd.Series, phases: pd.DataFrame, recorder: Recorder, steps: int
) -> list[dict]:
    """One row per recorded state: the first step and the last (steady state); ``live`` is
    live_bytes(events)."""
    rows = []
    for state, n in (("first", 1), ("steady", steps)):
        mine = phases[phases["step"] == n].set_index("stage")
        in_step = events["step"] == n
        row = {
            "state": state,
            "step": n,
            "trace_peak_mib": live[in_step].max() / 2**20 if in_step.any() else float("nan"),
            "allocator_peak_mib": recorder.allocator_peaks.get(n, float("nan")),
            **{f"after_{stage.replace(' ', '_')}_mib": mine["mib"].get(stage, float("nan")) for stage in STAGES},
        }
        peak = at_peak(events, n)
        row["peak_stage"] = peak.get("peak_stage", "")
        row.update({f"peak_{c.split(' ')[0]}_mib": peak.get(c, 0) / 2**20 for c in CATEGORIES})
        rows.append(row)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="2.7B")
    p.add_argument("--context-length", type=int, default=128)
    p.add_argument("--mode", choices=MODES, default="train_step")
    p.add_argument("--precision", choices=grid.PRECISIONS, default="fp32")
    p.add_argument(
        "--steps", type=int, default=3, help="steps recorded back to back (>= 2: the last is the steady state)"
    )
    p.add_argument(
        "--e2e-agreement",
        type=float,
        default=0.05,
        help="target written on the rows: the steady peak within this fraction of the e2e study's peak",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--pickle", help="also keep the raw CUDA snapshot here (large; never committed)")
    p.add_argument("--html", help="also write the snapshot's interactive trace view here (CUDA only; large)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.steps < 2:
        p.error("--steps must be at least 2: the first step is not the steady state")
    device = resolve_device(args.device)
    recorder = Recorder(device)
    record = record_cuda if device.type == "cuda" else record_profiler
    events, snapshot, status, note, model = record(args, device, recorder)

    out = Path(args.out)
    stem = out.with_suffix("")
    cfg = model_config(args.size, args.context_length)
    phases = pd.DataFrame(recorder.phases, columns=["phase", "trace_position", "allocated_mib"])
    live = live_bytes(events)
    phases["trace_mib"] = [
        live.iloc[int(pos) - 1] / 2**20 if pos and len(live) >= pos else 0.0 for pos in phases["trace_position"]
    ]
    phases["mib"] = phases["allocated_mib"].where(phases["allocated_mib"].notna(), phases["trace_mib"])
    labels = pd.DataFrame([stage_of(name) for name in phases["phase"]], columns=["step", "stage"], dtype=object)
    phases[["step", "stage"]] = labels.values if len(labels) else None
    if model is not None:
        events = attribute(
            events,
            phases,
            cfg,
            BATCH,
            args.context_length,
            [tuple(p.shape) for p in model.parameters()],
            args.precision,
        )
    else:
        events = label_stages(events, phases).assign(what="", category="")
    residual = BATCH * args.context_length * cfg.d_model * 4
    common = {
        "study": "memory",
        "size": args.size,
        "context_length": args.context_length,
        "mode": args.mode,
        "precision": args.precision,
        "batch_size": BATCH,
        "steps": args.steps,
        "e2e_agreement": args.e2e_agreement,
        "params": count_parameters(model) if model is not None else None,
        "profiler": "cuda_snapshot" if snapshot is not None else "torch_profiler",
        "model_built_mib": phases["mib"].iloc[0] if len(phases) else float("nan"),
        "residual_stream_mib": residual / 2**20,
        "residual_stream_seen": bool((events["size"] == residual).any()),
        "allocations": int((events["action"] == "alloc").sum()),
        "status": status,
        "note": note,
    }
    measured = step_rows(events, live, phases, recorder, args.steps) if status == "ok" else [{}]
    rows = [{**common, **r, **fingerprint(device)} for r in measured]
    keys = {  # the side tables name their point and, as every result row does, the commit that made them
        "mode": args.mode,
        "precision": args.precision,
        "context_length": args.context_length,
        "commit": rows[0]["commit"],
    }
    write_csv_atomic(largest_allocations(events).assign(**keys), f"{stem}-allocations.csv")
    write_csv_atomic(phases.drop(columns="mib").assign(**keys), f"{stem}-phases.csv")
    write_csv_atomic(timeline_series(events).assign(**keys), f"{stem}-timeline.csv")
    if snapshot is not None and args.html:
        from torch.cuda._memory_viz import trace_plot

        with atomic_path(args.html) as tmp:
            tmp.write_text(trace_plot(snapshot))
    if snapshot is not None and args.pickle:
        with atomic_path(args.pickle) as tmp, open(tmp, "wb") as f:
            pickle.dump(snapshot, f)
    write_rows(rows, out)
    for r in rows:
        log.info(
            f"{args.size} {args.precision} {args.mode} ctx {args.context_length} {r.get('state', '')}: {status}, "
            f"trace peak {r.get('trace_peak_mib', float('nan')):.1f} MiB"
        )


if __name__ == "__main__":
    run_study(main)
