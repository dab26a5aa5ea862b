"""The memory study: snapshot parsing, the offline timeline, and the torch.profiler path end to end."""

import pandas as pd
import pytest
import torch

from lmperf.memory_trace import (
    at_peak,
    attribute,
    events_before,
    events_from_profiler,
    events_from_snapshot,
    largest_allocations,
    live_bytes,
    our_frame,
    timeline_series,
)
from lmperf.model import model_config
from lmperf.report.memory_figures import timeline
from lmperf.studies import memory

MiB = 2**20


def frames(fn: str):
    return [
        {"filename": "/site-packages/torch/nn/functional.py", "line": 10, "name": "linear"},
        {"filename": "/repo/src/lmperf/model/transformer.py", "line": 42, "name": fn},
        {"filename": "/repo/src/lmperf/studies/memory.py", "line": 7, "name": "run_step"},
    ]


@pytest.fixture
def snapshot():
    """A snapshot's shape as torch.cuda.memory._snapshot() returns it, with a known story."""
    trace = [
        {"action": "segment_alloc", "addr": 0, "size": 64 * MiB, "frames": []},
        {"action": "alloc", "addr": 1, "size": 8 * MiB, "frames": frames("__init__")},  # weights
        {"action": "alloc", "addr": 2, "size": 2 * MiB, "frames": frames("forward")},  # activation
        {"action": "alloc", "addr": 3, "size": 16 * MiB, "frames": frames("step")},  # optimizer state
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
    assert (top["largest_share"] == 0.10).all()  # the share listed, which the report states
    assert top["frame"][0] == "lmperf/model/transformer.py:42:step"
    assert "what" in top  # empty until attributed


def test_innermost_frame_of_our_code():
    assert our_frame(frames("forward")) == "lmperf/model/transformer.py:42:forward"
    assert our_frame([{"filename": "/torch/x.py", "line": 1, "name": "f"}]) == ""


def test_shape_rules_name_allocations_without_a_frame():
    """A hand-made trace of one train step: weights built, activations in forward, frame-less blocks
    in backward (a gradient, 8-byte logits, fp32 scores), AdamW state in the optimizer step."""
    cfg = model_config("small", 512)
    batch, ctx = 4, 512
    weight = (cfg.d_model, cfg.d_model)
    logits8 = batch * ctx * cfg.vocab_size * 8
    scores4 = -(-batch * cfg.num_heads * ctx * ctx * 4 // 512) * 512
    sizes = [
        cfg.d_model * cfg.d_model * 4,
        batch * ctx * cfg.d_model * 4,
        cfg.d_model * cfg.d_model * 4,
        logits8,
        scores4,
        cfg.d_model * cfg.d_model * 4,
        4096 * 7,
    ]
    trace = [{"action": "alloc", "addr": i, "size": n, "frames": []} for i, n in enumerate(sizes)]
    scratch = cfg.d_model * cfg.d_model * 4  # made and freed inside the optimizer step
    trace += [
        {"action": "alloc", "addr": 99, "size": scratch, "frames": []},
        {"action": "free_completed", "addr": 99, "size": scratch, "frames": []},
    ]
    events = events_from_snapshot({"device_traces": [trace]})
    phases = pd.DataFrame(
        {
            "phase": ["model built", "step 1: after forward", "step 1: after backward", "step 1: after optimizer step"],
            "trace_position": [1, 2, 5, 9],
        }
    )
    named = attribute(events, phases, cfg, batch, ctx, [weight], "fp32")
    assert list(named["what"][:6]) == [
        "weight",
        "residual stream, q, k, v (B·T·d) fp32",
        "gradient",
        "logits (B·T·V) int64",
        "attention scores/probabilities (B·H·T·T) fp32",
        "optimizer state (first step: AdamW creates m and v)",
    ]
    assert named["what"].iloc[6] == ""  # no rule knows 28,672 bytes here
    assert named["what"].iloc[7] == "optimizer scratch (freed within the step)"
    assert list(named["category"][:6]) == [
        "weights",
        "activations and temporaries",
        "gradients",
        "activations and temporaries",
        "activations and temporaries",
        "optimizer state",
    ]
    peak = at_peak(named, 1)
    assert (
        peak["trace_peak_bytes"] == sum(sizes) + scratch
        and peak["gradients"] == sizes[2]
        and peak["weights"] == sizes[0]
    )
    top = largest_allocations(named)
    assert top["what"].iloc[0] == "logits (B·T·V) int64"


def test_timeline_png_from_the_csv_series(snapshot, tmp_path):
    events = events_from_snapshot(snapshot)
    phases = pd.DataFrame(
        {"phase": ["model built", "step 1: after forward"], "trace_position": [2, 4], "stage": ["build", "forward"]}
    )
    series = timeline_series(attribute(events, phases, model_config("nano", 16), 2, 16, [(8, 8)], "fp32"))
    assert series.drop(columns=["event", "step"]).sum(axis=1).max() == pytest.approx(26)  # MiB, the trace's peak
    timeline(series, phases, tmp_path / "t.png", title="fixture")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_fallback_records_the_first_and_the_steady_step(tmp_path):
    out = tmp_path / "fp32-train_step-ctx32.csv"
    memory.main(
        [
            "--size",
            "nano",
            "--context-length",
            "32",
            "--mode",
            "train_step",
            "--device",
            "cpu",
            "--steps",
            "3",
            "--out",
            str(out),
        ]
    )
    rows = pd.read_csv(out).set_index("state")
    assert list(rows.index) == ["first", "steady"] and list(rows["step"]) == [1, 3]
    assert (rows["profiler"] == "torch_profiler").all() and (rows["status"] == "ok").all()
    first = rows.loc["first"]
    assert first["residual_stream_mib"] == pytest.approx(memory.BATCH * 32 * model_config("nano", 32).d_model * 4 / MiB)
    assert first["residual_stream_seen"]  # the residual stream's exact size appears among the allocations
    assert first["model_built_mib"] < first["after_forward_mib"] <= first["trace_peak_mib"]
    # AdamW's state exists from the second step on: the steady step ends its forward higher than the first did
    assert rows.loc["steady", "after_forward_mib"] > first["after_forward_mib"]
    phases = pd.read_csv(tmp_path / "fp32-train_step-ctx32-phases.csv")
    assert list(phases["phase"][:4]) == [
        "model built",
        "step 1: after forward",
        "step 1: after backward",
        "step 1: after optimizer step",
    ]
    assert len(phases) == 1 + 3 * 3 and phases["trace_position"].is_monotonic_increasing
    assert len(pd.read_csv(tmp_path / "fp32-train_step-ctx32-allocations.csv")) > 0
    series = pd.read_csv(tmp_path / "fp32-train_step-ctx32-timeline.csv")
    live = series.drop(columns=["event", "step", "mode", "precision", "context_length", "commit"])
    assert list(live.columns) == ["weights", "optimizer state", "gradients", "activations and temporaries"]
    assert (live >= 0).all(axis=None)  # every free is matched to its block by address
    # at the steady peak the trace holds the weights and AdamW's m and v, each of the computed size
    steady = rows.loc["steady"]
    assert steady["peak_weights_mib"] == pytest.approx(4 * steady["params"] / MiB, rel=0.01)
    assert steady["peak_optimizer_mib"] == pytest.approx(8 * steady["params"] / MiB, rel=0.01)
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.html"))  # data only


def test_live_memory_is_never_negative_when_blocks_made_before_the_trace_are_freed():
    """torch.profiler's trace starts with blocks already live; their frees must not be subtracted
    from what the trace saw (the train step's timeline went below zero when they were)."""
    from torch.profiler import ProfilerActivity, profile

    made_before = [torch.ones(MiB // 4) for _ in range(4)]  # 4 MiB live before recording starts
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = torch.ones(MiB // 4)  # 1 MiB
        made_before.clear()  # frees the 4 MiB made before
        doubled = kept * 2  # 1 MiB more, then freed
        del doubled
    events = events_from_profiler(prof)
    live = live_bytes(events)
    assert (live >= 0).all()
    assert live.max() == pytest.approx(2 * MiB, abs=64) and live.iloc[-1] == MiB  # (and a scalar or two)
    made = events[(events["action"] == "alloc") & (events["size"] == MiB)]
    assert len(made) == 2 and made["frame"].str.startswith("op aten::").all()  # each names the op that made it
    del kept


def test_a_free_of_a_block_the_trace_did_not_see_allocated_is_ignored():
    events = pd.DataFrame(
        {
            "action": ["free", "alloc", "free", "free"],
            "addr": [7, 1, 1, 8],
            "size": [6 * MiB, 2 * MiB, 2 * MiB, MiB],
            "frame": ["", "op aten::mm", "", ""],
        }
    )
    assert list(live_bytes(events)) == [0, 2 * MiB, 0, 0]


def test_one_step_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        memory.main(["--size", "nano", "--steps", "1", "--device", "cpu", "--out", str(tmp_path / "x.csv")])


def test_phase_boundaries_count_allocs_and_frees_only(snapshot):
    """A boundary is recorded as the trace's length then; segment and free_requested entries must not
    shift it along the events (they did, and the committed timelines' shading ran past the trace)."""
    events = events_from_snapshot(snapshot)
    assert events_before(events, 1) == 0  # after the segment_alloc: no event yet
    assert events_before(events, 4) == 3  # after the three allocs
    assert events_before(events, 6) == 4  # free_requested + free_completed: one event
    assert events_before(events, len(snapshot["device_traces"][0])) == len(events)


def test_the_e2e_cross_check_pairs_only_rows_of_one_commit():
    from lmperf.report.memory_section import e2e_agreement

    point = {"size": "2.7B", "precision": "fp32", "context_length": 512, "mode": "train_step", "status": "ok"}
    memory_rows = pd.DataFrame([{**point, "state": "steady", "allocator_peak_mib": 1010.0, "commit": "a"}])
    e2e_rows = pd.DataFrame(
        [
            {**point, "compile": "eager", "attention": "naive", "peak_mem_gib": 1000 / 1024, "commit": c}
            for c in ("a", "b")
        ]
    )
    joined = e2e_agreement(memory_rows, e2e_rows)
    assert list(joined["commit"]) == ["a"] and joined["difference"].iloc[0] == pytest.approx(0.01)
    assert e2e_agreement(memory_rows, e2e_rows[e2e_rows["commit"] == "b"]).empty
