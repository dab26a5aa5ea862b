"""The memory study: snapshot parsing, the offline timeline, and the torch.profiler path end to end."""

import pandas as pd
import pytest

from lmperf.memory_trace import events_before, events_from_snapshot, largest_allocations, live_bytes, our_frame
from lmperf.report.memory_figures import timeline
from lmperf.model import model_config
from lmperf.studies import memory

MiB = 2**20


def frames(fn: str):
    return [{"filename": "/site-packages/torch/nn/functional.py", "line": 10, "name": "linear"},
            {"filename": "/repo/src/lmperf/model/transformer.py", "line": 42, "name": fn},
            {"filename": "/repo/src/lmperf/studies/memory.py", "line": 7, "name": "run_step"}]


@pytest.fixture
def snapshot():
    """A snapshot's shape as torch.cuda.memory._snapshot() returns it, with a known story."""
    trace = [
        {"action": "segment_alloc", "addr": 0, "size": 64 * MiB, "frames": []},
        {"action": "alloc", "addr": 1, "size": 8 * MiB, "frames": frames("__init__")},   # weights
        {"action": "alloc", "addr": 2, "size": 2 * MiB, "frames": frames("forward")},    # activation
        {"action": "alloc", "addr": 3, "size": 16 * MiB, "frames": frames("step")},      # optimizer state
        {"action": "free_requested", "addr": 2, "size": 2 * MiB, "frames": []},
        {"action": "free_completed", "addr": 2, "size": 2 * MiB, "frames": []},
        {"action": "free_completed", "addr": 99, "size": 4 * MiB, "frames": []},  # allocated before the trace
    ] + [{"action": "alloc", "addr": 10 + i, "size": 1024, "frames": frames("small")} for i in range(20)]
    return {"segments": [], "device_traces": [trace]}


def test_snapshot_events_live_memory_and_largest_allocations(snapshot):
    events = events_from_snapshot(snapshot)
    assert list(events["action"][:5]) == ["alloc", "alloc", "alloc", "free", "free"]
    live = live_bytes(events)
    assert live.iloc[2] == 26 * MiB and live.iloc[3] == 24 * MiB and live.iloc[4] == 24 * MiB
    assert live.iloc[-1] == 24 * MiB + 20 * 1024 and live.max() == 26 * MiB  # the unknown block's free is ignored
    top = largest_allocations(events)
    assert list(top["size_mib"][:3]) == [16.0, 8.0, 2.0]  # 23 allocations: the top 10% are the 3 largest
    assert top["frame"][0] == "lmperf/model/transformer.py:42:step"


def test_innermost_frame_of_our_code():
    assert our_frame(frames("forward")) == "lmperf/model/transformer.py:42:forward"
    assert our_frame([{"filename": "/torch/x.py", "line": 1, "name": "f"}]) == ""


def test_timeline_png_from_a_snapshot(snapshot, tmp_path):
    phases = pd.DataFrame({"phase": ["model built", "after forward"], "trace_position": [2, 4]})
    timeline(events_from_snapshot(snapshot), phases, tmp_path / "t.png", title="fixture")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_fallback_records_a_train_step(tmp_path):
    out = tmp_path / "fp32-train_step-ctx32.csv"
    memory.main(["--size", "nano", "--context-length", "32", "--mode", "train_step", "--device", "cpu",
                 "--out", str(out)])
    row = pd.read_csv(out).iloc[0]
    assert row["profiler"] == "torch_profiler" and row["status"] == "ok"
    assert row["residual_stream_mib"] == pytest.approx(memory.BATCH * 32 * model_config("nano", 32).d_model * 4 / MiB)
    assert row["residual_stream_seen"]  # the residual stream's exact size appears among the allocations
    assert row["model_built_mib"] < row["after_forward_mib"] <= row["trace_peak_mib"]
    phases = pd.read_csv(tmp_path / "fp32-train_step-ctx32-phases.csv")
    assert list(phases["phase"]) == ["model built", "after forward", "after backward", "after optimizer step"]
    assert phases["trace_position"].is_monotonic_increasing
    assert len(pd.read_csv(tmp_path / "fp32-train_step-ctx32-allocations.csv")) > 0
    assert (tmp_path / "fp32-train_step-ctx32.png").exists() and (tmp_path / "fp32-train_step-ctx32.html").exists()


def test_phase_boundaries_count_allocs_and_frees_only(snapshot):
    """A boundary is recorded as the trace's length then; segment and free_requested entries must not
    shift it along the events (they did, and the committed timelines' shading ran past the trace)."""
    events = events_from_snapshot(snapshot)
    assert events_before(events, 1) == 0  # after the segment_alloc: no event yet
    assert events_before(events, 4) == 3  # after the three allocs
    assert events_before(events, 6) == 4  # free_requested + free_completed: one event
    assert events_before(events, len(snapshot["device_traces"][0])) == len(events)
