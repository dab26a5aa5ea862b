"""Allocation traces, from a CUDA memory snapshot or from torch.profiler, in one form, and what
each allocation is.

An event is (action, addr, size, frame): action "alloc" or "free", frame the innermost stack frame
of lmperf's own code that made the allocation ("file:line:function"; "" when none, the op's name
on the torch.profiler path). From the events: live bytes after each event, the peak, the largest
allocations, and for each allocation what it is.

Many large allocations have no Python frame of ours: autograd's engine makes them in backward.
They are named by shape (``shape_names``): a size equals the bytes of one tensor the step makes
(logits B·T·V, attention scores B·H·T·T, the residual stream B·T·d, the FFN hidden B·T·d_ff, a
parameter) at some element width. Where the recorded step is (``stage``) tells a parameter-sized
block's role: made while building the model, a weight; in backward, a gradient; in the optimizer
step, optimizer state.
"""

import pandas as pd

OUR_CODE = "lmperf"
WIDTHS = {1: "bool", 2: "bf16", 4: "fp32", 8: "int64"}  # bytes per element -> the usual dtype of that width
ALLOCATOR_ROUND = 512  # the CUDA caching allocator rounds every request up to a multiple of 512 bytes
CATEGORIES = ("weights", "optimizer state", "gradients", "activations and temporaries")


def our_frame(frames: list[dict]) -> str:
    """Innermost frame from our package (snapshots list frames innermost first)."""
    for frame in frames or []:
        filename = frame.get("filename", "")
        if f"/{OUR_CODE}/" in filename.replace("\\", "/"):
            short = filename.replace("\\", "/").split(f"/{OUR_CODE}/", 1)[1]
            return f"{OUR_CODE}/{short}:{frame.get('line')}:{frame.get('name')}"
    return ""


def profiler_events(prof) -> list:
    """Every event of a finished torch.profiler run (ops, ranges, allocations and frees), in start
    order: the profiler's event tree, flattened."""
    found, todo = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while todo:
        event = todo.pop()
        found.append(event)
        todo.extend(event.children)
    return sorted(found, key=lambda e: e.start_time_ns)


def events_from_profiler(prof) -> pd.DataFrame:
    """The allocations and frees that torch.profiler(profile_memory=True) recorded, in order, each with
    the block's address: an allocation is labelled with the op that made it ("op aten::mm": torch
    2.13's profiler fails on CPU with with_stack=True, so no Python frame is known). A block allocated
    before the profiler started has no allocation here, and the profiler reports no free of it, so
    live memory counts only what the trace saw and never goes below zero. ``start_ns`` is the event's
    time on the profiler's clock, to place other events (phase boundaries) among these."""
    from torch._C._profiler import _EventType

    rows = []
    for event in profiler_events(prof):
        if event.tag != _EventType.Allocation:
            continue
        fields = event.extra_fields
        freed = fields.alloc_size < 0
        rows.append(
            {
                "action": "free" if freed else "alloc",
                "addr": fields.ptr,
                "size": abs(fields.alloc_size),
                "frame": "" if freed or event.parent is None else f"op {event.parent.name}",
                "start_ns": event.start_time_ns,
            }
        )
    return pd.DataFrame(rows, columns=["action", "addr", "size", "frame", "start_ns"])


def events_from_snapshot(snapshot: dict, device: int = 0) -> pd.DataFrame:
    """The allocator's trace of one device: alloc and free_completed entries, in order. ``trace_index``
    is the entry's place in the whole trace (which also holds segment and free_requested entries)."""
    rows = []
    for index, entry in enumerate(snapshot["device_traces"][device]):
        action = {"alloc": "alloc", "free_completed": "free"}.get(entry["action"])
        if action:
            rows.append(
                {
                    "action": action,
                    "addr": entry["addr"],
                    "size": entry["size"],
                    "frame": our_frame(entry.get("frames")) if action == "alloc" else "",
                    "trace_index": index,
                }
            )
    return pd.DataFrame(rows, columns=["action", "addr", "size", "frame", "trace_index"])


def events_before(events: pd.DataFrame, trace_length: int) -> int:
    """How many events came before a point recorded as the whole trace's length then: the place of a
    phase boundary among the events, which count allocs and frees only."""
    return int((events["trace_index"] < trace_length).sum())


def live_bytes(events: pd.DataFrame) -> pd.Series:
    """Bytes allocated and not yet freed after each event. Frees of blocks allocated before the trace
    began are ignored, so the series starts from what the trace saw and is never negative."""
    return live_by(events.assign(_all=""), "_all")[""]


def live_by(events: pd.DataFrame, column: str) -> pd.DataFrame:
    """Live bytes after each event, split by the allocation's value of ``column``: a free is charged
    to the value its block was allocated with; a free of a block the trace did not see allocated is
    ignored."""
    keys = list(dict.fromkeys(events.loc[events["action"] == "alloc", column]))
    if "" not in keys:
        keys.append("")
    owner, current, out = {}, dict.fromkeys(keys, 0), []
    for action, addr, size, key in zip(events["action"], events["addr"], events["size"], events[column]):
        if action == "alloc":
            if addr in owner:  # a block allocated again without its free recorded: it is replaced
                previous, freed = owner[addr]
                current[previous] -= freed
            owner[addr] = (key, size)
            current[key] += size
        elif addr in owner:
            key, freed = owner.pop(addr)
            current[key] -= freed
        out.append(dict(current))
    return pd.DataFrame(out, columns=keys, index=events.index).fillna(0).astype("int64")


LARGEST_SHARE = 0.10  # the allocations listed as the largest: this share of them, by size


def largest_allocations(events: pd.DataFrame, top_fraction: float = LARGEST_SHARE) -> pd.DataFrame:
    """Allocations in the top ``top_fraction`` by size, grouped by (size, what, frame), largest first;
    each row carries ``top_fraction`` as ``largest_share``, which the report states."""
    allocs = events[events["action"] == "alloc"]
    if "what" not in allocs:
        allocs = allocs.assign(what="")
    if allocs.empty:
        return pd.DataFrame(columns=["size_mib", "what", "frame", "count"])
    threshold = allocs["size"].quantile(1 - top_fraction)
    top = allocs[allocs["size"] >= threshold]
    grouped = top.groupby(["size", "what", "frame"], dropna=False).size().reset_index(name="count")
    grouped["size_mib"] = grouped["size"] / 2**20
    columns = ["size_mib", "what", "frame", "count"]
    return (
        grouped.sort_values(["size", "count"], ascending=False)[columns]
        .reset_index(drop=True)
        .assign(largest_share=top_fraction)
    )


# --- what an allocation is ---------------------------------------------------------------------------


def _rounded(nbytes: int) -> int:
    return -(-nbytes // ALLOCATOR_ROUND) * ALLOCATOR_ROUND


def shape_names(cfg, batch: int, context: int, parameter_shapes: list[tuple[int, ...]]) -> dict[int, list[str]]:
    """Allocation size in bytes -> the tensors of that size a step of this model makes, each at the
    element widths it is seen with (8-byte blocks of the logits' and the scores' shapes come from
    the backward of amax; 1-byte ones of the scores' shape are masks). Activation shapes are named
    as such ("logits (B·T·V) fp32"); a parameter's as "parameter-sized (rows×cols) fp32", its role
    decided by ``what``. A size several rules match is named by all of them, joined by "or"."""
    b, t, d, f, h, v = batch, context, cfg.d_model, cfg.d_ff, cfg.num_heads, cfg.vocab_size
    tensors = {
        "logits (B·T·V)": (b * t * v, (2, 4, 8)),
        "attention scores/probabilities (B·H·T·T)": (b * h * t * t, (1, 2, 4, 8)),
        "residual stream, q, k, v (B·T·d)": (b * t * d, (2, 4)),
        "FFN hidden (B·T·d_ff)": (b * t * f, (2, 4)),
        **{
            f"parameter-sized ({'×'.join(map(str, shape))})": (_numel(shape), (2, 4))
            for shape in sorted(set(parameter_shapes))
        },
    }
    names: dict[int, list[str]] = {}
    for name, (numel, widths) in tensors.items():
        for width in widths:
            for size in sizes_of(numel * width):
                names.setdefault(size, []).append(f"{name} {WIDTHS[width]}")
    return names


def sizes_of(nbytes: int) -> set[int]:
    """The sizes an allocation of ``nbytes`` is recorded with: as asked (the CPU allocator) and rounded
    up as the CUDA caching allocator rounds it."""
    return {nbytes, _rounded(nbytes)}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def stage_of(phase: str) -> tuple[int, str]:
    """(step, stage) of a phase boundary's name: "model built" -> (0, "build"),
    "step 2: after backward" -> (2, "backward")."""
    if phase == "model built":
        return 0, "build"
    step, stage = phase.split(": after ", 1)
    return int(step.removeprefix("step ")), stage


def label_stages(events: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """The events with the (step, stage) in which each happened, from the phase boundaries (each
    boundary's ``trace_position`` is the count of events before it). Events after the last boundary
    get stage "after"."""
    step, stage = [], []
    bounds = [(int(pos), *stage_of(name)) for name, pos in zip(phases["phase"], phases["trace_position"])]
    j = 0
    for i in range(len(events)):
        while j < len(bounds) and bounds[j][0] <= i:
            j += 1
        if j < len(bounds):
            step.append(bounds[j][1])
            stage.append(bounds[j][2])
        else:
            step.append(bounds[-1][1] if bounds else 0)
            stage.append("after")
    return events.assign(step=step, stage=stage)


def what(
    size: int, step: int, stage: str, names: dict[int, list[str]], parameter_bytes: set[int], precision: str
) -> str:
    """What one allocation is, from its size and where it was made; "" when no rule knows."""
    if size in parameter_bytes:  # an fp32 parameter's size: its role follows from the stage
        role = {"build": "weight", "backward": "gradient", "optimizer step": "optimizer state"}.get(stage)
        if role:
            return role + (" (first step: AdamW creates m and v)" if role == "optimizer state" and step == 1 else "")
    matches = names.get(size, [])
    if (
        precision == "bf16"
        and stage == "forward"
        and any(m.startswith("parameter-sized") and m.endswith("bf16") for m in matches)
    ):
        return "bf16 copy of a weight (autocast's cast cache)"
    return " or ".join(matches)


def attribute(
    events: pd.DataFrame,
    phases: pd.DataFrame,
    cfg,
    batch: int,
    context: int,
    parameter_shapes: list[tuple[int, ...]],
    precision: str,
) -> pd.DataFrame:
    """The events with ``step``, ``stage``, ``what`` (shape rules) and ``category`` (for the
    memory budget: weights, optimizer state, gradients, activations and temporaries)."""
    events = label_stages(events, phases)
    names = shape_names(cfg, batch, context, parameter_shapes)
    parameter_bytes = {size for s in parameter_shapes for size in sizes_of(_numel(s) * 4)}
    events["what"] = [
        what(s, st, sg, names, parameter_bytes, precision) if a == "alloc" else ""
        for a, s, st, sg in zip(events["action"], events["size"], events["step"], events["stage"])
    ]
    # optimizer-state-sized blocks freed before their optimizer step ends are its scratch (sqrt(v), ...)
    temporary = freed_within_stage(events)
    scratch = temporary & events["what"].str.startswith("optimizer state")
    events.loc[scratch, "what"] = "optimizer scratch (freed within the step)"
    events["category"] = [_category(a, sg, w) for a, sg, w in zip(events["action"], events["stage"], events["what"])]
    return events


def freed_within_stage(events: pd.DataFrame) -> pd.Series:
    """For each alloc event: is its block freed in the same (step, stage) that made it?"""
    made, out = {}, pd.Series(False, index=events.index)
    for index, action, addr, step, stage in zip(
        events.index, events["action"], events["addr"], events["step"], events["stage"]
    ):
        if action == "alloc":
            made[addr] = (index, step, stage)
        elif addr in made:
            origin, step0, stage0 = made.pop(addr)
            out[origin] = (step0, stage0) == (step, stage)
    return out


def _category(action: str, stage: str, name: str) -> str:
    if action != "alloc":
        return ""
    if stage == "build":
        return "weights"
    if name.startswith("optimizer state"):
        return "optimizer state"
    if name == "gradient":
        return "gradients"
    return "activations and temporaries"


def at_peak(events: pd.DataFrame, step: int) -> dict:
    """Live bytes per category at the moment of ``step``'s highest live total (attributed events)."""
    live = live_by(events, "category")
    total = live.sum(axis=1)
    in_step = events["step"] == step
    if not in_step.any():
        return {}
    peak_index = total[in_step].idxmax()
    return {
        "trace_peak_bytes": int(total[peak_index]),
        "peak_stage": events.loc[peak_index, "stage"],
        **{c: int(live.loc[peak_index, c]) if c in live else 0 for c in CATEGORIES},
    }


def timeline_series(events: pd.DataFrame, max_points: int = 2000) -> pd.DataFrame:
    """Live MiB per category after each event, thinned to at most ``max_points`` rows (every k-th
    event, and the peak of the total kept), for the timeline figure."""
    live = live_by(events, "category").drop(columns="", errors="ignore")
    live = live.reindex(columns=[c for c in CATEGORIES if c in live], fill_value=0) / 2**20
    total = live.sum(axis=1)
    keep = set(range(0, len(live), max(1, len(live) // max_points))) | ({int(total.idxmax())} if len(total) else set())
    out = live.loc[sorted(keep)]
    out.insert(0, "event", out.index)
    out.insert(1, "step", events.loc[out.index, "step"].values)
    return out.reset_index(drop=True)
