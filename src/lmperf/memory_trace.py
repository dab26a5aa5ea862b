"""Allocation traces, from a CUDA memory snapshot or from torch.profiler, in one form.

An event is (action, addr, size, frame): action "alloc" or "free", frame the innermost stack frame
of lmperf's own code that made the allocation ("file:line:function"; "" when none, the op's name
on the torch.profiler path). From the
events: live bytes after each event, the peak, the largest allocations and where they come from.
"""

import pandas as pd

OUR_CODE = "lmperf"


def our_frame(frames: list[dict]) -> str:
    """Innermost frame from our package (snapshots list frames innermost first)."""
    for frame in frames or []:
        filename = frame.get("filename", "")
        if f"/{OUR_CODE}/" in filename.replace("\\", "/"):
            short = filename.replace("\\", "/").split(f"/{OUR_CODE}/", 1)[1]
            return f"{OUR_CODE}/{short}:{frame.get('line')}:{frame.get('name')}"
    return ""


def events_from_profiler(function_events) -> pd.DataFrame:
    """Signed self memory of each op, in start order: a positive delta is an allocation, labelled
    with the op that made it ("op aten::mm": torch 2.13's profiler fails on CPU with
    with_stack=True, so no Python frame is known), a negative one a free of that many bytes.
    ``start_us`` is the op's start on the profiler's clock, to place other events among these."""
    rows = []
    for e in sorted(function_events, key=lambda e: e.time_range.start):
        delta = e.self_cpu_memory_usage if e.name != "[memory]" else e.cpu_memory_usage
        if delta > 0:
            rows.append({"action": "alloc", "addr": f"op{e.id}", "size": delta, "frame": f"op {e.name}",
                         "start_us": e.time_range.start})
        elif delta < 0:
            rows.append({"action": "free", "addr": None, "size": -delta, "frame": "", "start_us": e.time_range.start})
    return pd.DataFrame(rows, columns=["action", "addr", "size", "frame", "start_us"])


def events_from_snapshot(snapshot: dict, device: int = 0) -> pd.DataFrame:
    """The allocator's trace of one device: alloc and free_completed entries, in order. ``trace_index``
    is the entry's place in the whole trace (which also holds segment and free_requested entries)."""
    rows = []
    for index, entry in enumerate(snapshot["device_traces"][device]):
        action = {"alloc": "alloc", "free_completed": "free"}.get(entry["action"])
        if action:
            rows.append({"action": action, "addr": entry["addr"], "size": entry["size"],
                         "frame": our_frame(entry.get("frames")) if action == "alloc" else "", "trace_index": index})
    return pd.DataFrame(rows, columns=["action", "addr", "size", "frame", "trace_index"])


def events_before(events: pd.DataFrame, trace_length: int) -> int:
    """How many events came before a point recorded as the whole trace's length then: the place of a
    phase boundary among the events, which count allocs and frees only."""
    return int((events["trace_index"] < trace_length).sum())


def live_bytes(events: pd.DataFrame) -> pd.Series:
    """Bytes allocated and not yet freed after each event. Frees of blocks allocated before the trace
    began are ignored, so the series starts from what the trace saw; a free without an address
    (torch.profiler's) subtracts its size."""
    sizes, total, out = {}, 0, []
    for action, addr, size in zip(events["action"], events["addr"], events["size"]):
        if action == "alloc":
            sizes[addr] = size
            total += size
        elif addr in sizes:
            total -= sizes.pop(addr)
        elif pd.isna(addr):  # torch.profiler's frees carry no address, only their size
            total -= size
        out.append(total)
    return pd.Series(out, index=events.index, dtype="int64")


def largest_allocations(events: pd.DataFrame, top_fraction: float = 0.10) -> pd.DataFrame:
    """Allocations in the top ``top_fraction`` by size, grouped by (size, frame), largest first."""
    allocs = events[events["action"] == "alloc"]
    if allocs.empty:
        return pd.DataFrame(columns=["size_mib", "frame", "count"])
    threshold = allocs["size"].quantile(1 - top_fraction)
    top = allocs[allocs["size"] >= threshold]
    grouped = top.groupby(["size", "frame"], dropna=False).size().reset_index(name="count")
    grouped["size_mib"] = grouped["size"] / 2**20
    return grouped.sort_values(["size", "count"], ascending=False)[["size_mib", "frame", "count"]].reset_index(drop=True)


def live_by_frame(events: pd.DataFrame, frames: list[str]) -> pd.DataFrame:
    """Live bytes after each event, split into the given frames and 'other' (for a stacked plot)."""
    columns = [*frames, "other"]
    owner, current, out = {}, dict.fromkeys(columns, 0), []
    for action, addr, size, frame in zip(events["action"], events["addr"], events["size"], events["frame"]):
        if action == "alloc":
            key = frame if frame in frames else "other"
            owner[addr] = (key, size)
            current[key] += size
        elif addr in owner:
            key, freed = owner.pop(addr)
            current[key] -= freed
        elif pd.isna(addr):
            current["other"] -= size
        out.append(dict(current))
    return pd.DataFrame(out, columns=columns)
