"""The timer and its statistics: bootstrap CIs, adaptive stopping, interleaving, host-bound rows,
the capturable optimizer, and a report that never mixes regimes in one median."""

import io
import re
import statistics

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lmperf.measure import Budget, harness, measure, median_ci, ratio_ci
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.measure.stats import converged, join_ms, resolved, split_ms
from lmperf.model import AdamW
from lmperf.report import e2e_section

CPU = torch.device("cpu")


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    hits = 0
    for trial in range(200):
        sample = rng.normal(10.0, 1.0, size=40)
        low, high = median_ci(sample, seed=trial)
        hits += low <= 10.0 <= high
    assert 0.88 <= hits / 200 <= 0.99


def test_median_ci_narrows_with_more_samples_and_is_a_point_for_constant_data():
    rng = np.random.default_rng(2)
    widths = [np.subtract(*median_ci(rng.exponential(1.0, size=n))[::-1]) for n in (20, 2000)]
    assert widths[1] < widths[0] / 4  # ~1/sqrt(n): 10x fewer at 100x the samples
    assert median_ci([3.0] * 7) == (3.0, 3.0)
    with pytest.raises(ValueError):
        median_ci([])


def test_ratio_ci_pairs_interleaved_rounds():
    rng = np.random.default_rng(3)
    drift = rng.uniform(1.0, 3.0, size=30)  # a slow stretch of the run hits both sides of a round
    value, low, high = ratio_ci(2.0 * drift, drift)
    assert value == pytest.approx(2.0) and low == pytest.approx(2.0) and high == pytest.approx(2.0)
    assert resolved(low, high)
    same = rng.normal(5.0, 0.5, size=(2, 30))
    _, low, high = ratio_ci(same[0], same[1])
    assert not resolved(low, high)  # equal distributions: the CI straddles 1, "not resolved"


def _stepper(times):
    """A step whose host time is drawn from ``times`` (seconds), by advancing a fake clock."""
    clock = {"now": 0.0}
    samples = iter(times)

    def step():
        clock["now"] += next(samples)

    return step, clock


@pytest.fixture
def fake_clock(monkeypatch):
    from lmperf.measure import timing

    state = {"clock": None}
    monkeypatch.setattr(timing.timeit, "default_timer", lambda: state["clock"]["now"])
    return state


def test_adaptive_stops_early_on_steady_steps(fake_clock):
    step, fake_clock["clock"] = _stepper([0.010] * 1000)
    timings = measure({"a": step}, CPU, warmup_steps=2, budget=Budget(min_steps=10, max_seconds=100))
    assert len(timings["a"].host_s) == 10 and len(timings["a"].warmup_s) == 2


def test_adaptive_runs_to_the_time_cap_on_noisy_steps(fake_clock):
    rng = np.random.default_rng(4)
    step, fake_clock["clock"] = _stepper(list(rng.uniform(0.001, 0.1, size=5000)))
    timings = measure({"a": step}, CPU, warmup_steps=0, budget=Budget(min_steps=10, rel_halfwidth=0.01, max_seconds=5))
    spent = sum(timings["a"].host_s)
    assert len(timings["a"].host_s) > 10 and 5 <= spent <= 5.2  # stopped by the cap, not by convergence
    assert not converged(timings["a"].host_s, 0.01)


def test_measure_interleaves_and_drops_a_step_that_runs_out_of_memory():
    calls = []

    def oom():
        calls.append("b")
        raise torch.OutOfMemoryError("CUDA out of memory")

    timings = measure(
        {"a": lambda: calls.append("a"), "b": oom, "c": lambda: calls.append("c")},
        CPU,
        warmup_steps=0,
        budget=Budget(min_steps=3, max_steps=3),
    )
    assert calls == ["a", "b", "c", "a", "c", "a", "c"]  # A B C rounds; B leaves at its first OOM
    assert isinstance(timings["b"].error, torch.OutOfMemoryError) and not timings["b"].host_s
    assert len(timings["a"].host_s) == len(timings["c"].host_s) == 3


def test_host_bound_when_launched_exceeds_graphed_by_more_than_ten_percent(monkeypatch):
    """A replay (faked on the CPU by a step that does nothing) much faster than the launched step."""

    def fast_replay(step, device, pool=None, **capture):
        return lambda: None

    monkeypatch.setattr(harness, "capture_graph", fast_replay)
    spec = BenchmarkSpec("nano", (8,), budget=Budget(3, max_steps=3), warmup_steps=1)
    rows = {r["mode"]: r for r in run_benchmark(spec, device=CPU)}
    for row in rows.values():
        assert row["host_bound"] is True
        assert row["host_overhead_ms"] == pytest.approx(row["median_ms"] - row["graphed_median_ms"])
        assert row["graphed_ci95_low_ms"] <= row["graphed_median_ms"] <= row["graphed_ci95_high_ms"]

    def same_speed(step, device, pool=None, **capture):
        return step

    monkeypatch.setattr(harness, "capture_graph", same_speed)
    rows = run_benchmark(spec, modes=["train_step"], device=CPU)
    assert rows[0]["host_bound"] is (rows[0]["median_ms"] > 1.1 * rows[0]["graphed_median_ms"])


class OpLog(TorchDispatchMode):
    """The ops one optimizer step dispatches, with their non-tensor arguments."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        scalars = (int, float, bool, str, type(None))
        flat = [a for a in args if isinstance(a, scalars)]
        named = [(k, v) for k, v in sorted((kwargs or {}).items()) if isinstance(v, scalars)]
        self.ops.append((str(func), tuple(flat), tuple(named)))
        return func(*args, **(kwargs or {}))


def test_adamw_is_capturable_every_step_dispatches_the_same_work():
    """A CUDA graph replays the ops and host-side scalars of the step it captured: a capturable
    optimizer's later steps must dispatch exactly those (the step count lives on the device)."""
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(5))]
    opt = AdamW(params, lr=0.1)
    logs = []
    for _ in range(3):
        for p in params:
            p.grad = torch.randn_like(p)
        with OpLog() as log:
            opt.step()
        logs.append(log.ops)
    assert logs[1] == logs[2] and len(logs[1]) > 5
    assert opt.state[params[0]]["t"].item() == 3


def _regime_frame() -> pd.DataFrame:
    """Graphed times built so each regime has its own ratios: a median across regimes would show a
    number that no regime has."""
    backward = {("fp32", "eager"): 3.0, ("fp32", "compiled"): 2.0, ("bf16", "eager"): 4.0, ("bf16", "compiled"): 2.5}
    forward = {
        ("fp32", "eager"): 10.0,
        ("fp32", "compiled"): 10 / 1.2,
        ("bf16", "eager"): 5.0,
        ("bf16", "compiled"): 10 / 6,
    }
    rows = []
    for size, params, scale in (("small", 128_625_408, 1.0), ("medium", 423_183_360, 2.0)):
        for ctx, grow in ((128, 1.0), (256, 1.5)):
            for (precision, compile_), fwd in forward.items():
                for mode, t in (
                    ("forward", fwd),
                    ("forward_backward", fwd * backward[precision, compile_]),
                    ("train_step", fwd * backward[precision, compile_] + 1.0),
                ):
                    ms = t * scale * grow
                    rows.append(
                        {
                            "attention": "naive",
                            "size": size,
                            "params": params,
                            "context_length": ctx,
                            "precision": precision,
                            "compile": compile_,
                            "mode": mode,
                            "status": "ok",
                            "note": "",
                            "median_ms": 3 * ms,
                            "ci95_low_ms": 3 * ms,
                            "ci95_high_ms": 3 * ms,
                            "graphed_median_ms": ms,
                            "graphed_ci95_low_ms": ms,
                            "graphed_ci95_high_ms": ms,
                            "host_bound": True,
                            "host_overhead_ms": 2 * ms,
                            "event_median_ms": 3 * ms,
                            "graphed_mfu": 0.1,
                            "mfu": 0.03,
                            "peak_tflops": 989.4,
                            "graphed_step_times_ms": f"{ms};{ms}",
                            "device_name": "NVIDIA H100 80GB HBM3",
                            "torch_version": "2.11",
                            "cuda_version": "13.0",
                            "triton_version": "3.6.0",
                            "driver_version": "580",
                            "commit": "abc",
                            "batch_size": 4,
                            "optimizer": "lmperf",
                            "matmul_precision": "highest",
                            "warmup_steps": 5,
                            "measured_steps": 10,
                        }
                    )
    return pd.DataFrame(rows)


def test_no_sentence_takes_a_median_across_precisions_or_compile_modes():
    warmup = pd.DataFrame(
        columns=[
            "size",
            "mode",
            "warmup_steps",
            "status",
            "median_ms",
            "cv",
            "first_step_ms",
            "step_times_ms",
            "context_length",
            "commit",
        ]
    )
    text = e2e_section.render(_regime_frame(), warmup)
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("|"))
    # forward+backward over forward, per regime
    for regime, value in (
        ("fp32 eager", "3.00"),
        ("fp32 compiled", "2.00"),
        ("bf16 eager", "4.00"),
        ("bf16 compiled", "2.50"),
    ):
        assert f"{regime} {value}×" in prose
    # bf16 speed-up per compile mode (2x eager, 6x compiled), compile speed-up per precision (1.2x fp32, 3x bf16)
    assert (
        "forward, eager: the bf16 speed-up is 2.00×" in prose
        and "forward, compiled: the bf16 speed-up is 5.00×" in prose
    )
    assert "forward, fp32: the torch.compile speed-up is 1.20×" in prose
    assert "forward, bf16: the torch.compile speed-up is 3.00×" in prose
    # the cross-regime medians appear nowhere: 2.75 (backward), 3.50 (bf16), 2.10 (compile)
    for mixed in ("2.75×", "3.50×", "2.10×"):
        assert mixed not in prose
    assert "no violation" in prose
    numbers = [float(x) for x in re.findall(r"median launch overhead ([\d.]+)%", prose)]
    assert numbers == [pytest.approx(100 * 2 / 3, abs=0.05)] * 4  # launched = 3x graphed in every regime
    assert statistics.median(numbers) == pytest.approx(66.7, abs=0.05)


def test_physics_violations_are_found():
    from lmperf.report.e2e_analysis import physics_violations

    frame = _regime_frame()
    bad = (
        (frame["size"] == "medium")
        & (frame["context_length"] == 256)
        & (frame["mode"] == "train_step")
        & (frame["precision"] == "fp32")
        & (frame["compile"] == "eager")
    )
    frame.loc[bad, "graphed_median_ms"] = 1.0  # faster than its own forward+backward and than a shorter context
    kinds = set(physics_violations(frame)["kind"])
    assert kinds == {
        "train_step < forward_backward",
        "train_step falls as context_length grows",
        "train_step falls as params grows",
    }


def test_speedups_pair_only_rows_of_one_commit():
    from lmperf.report.e2e_analysis import speedup

    frame = _regime_frame()
    assert len(speedup(frame, "precision", "fp32", "bf16")) == 24  # 2 sizes x 2 contexts x 2 compile modes x 3 modes
    frame.loc[frame["precision"] == "bf16", "commit"] = "def"  # bf16 measured by other code
    assert speedup(frame, "precision", "fp32", "bf16").empty


def test_a_cell_of_times_reads_back_whether_pandas_saw_text_or_a_number():
    """join_ms's cells read back as lists; a column whose cells each hold one value comes back from
    pandas as numbers, and each such cell is a list of one."""
    frame = pd.read_csv(io.StringIO("many,one\n1.5000;2.2500,0.75\n,\n"))
    assert split_ms(frame.loc[0, "many"]) == [1.5, 2.25] and split_ms(frame.loc[0, "one"]) == [0.75]
    assert split_ms(frame.loc[1, "many"]) == [] and split_ms(frame.loc[1, "one"]) == []
    assert split_ms(join_ms([0.0015, 0.00225])) == [1.5, 2.25]


def test_a_capture_out_of_memory_is_tried_once_more_after_a_full_collection(monkeypatch):
    """Captures return cached blocks without a full garbage collection (it costs 0.1-0.27 s each); a
    dead reference cycle may still hold memory, so a capture that runs out of it collects, then tries
    once more."""
    from lmperf.measure import timing

    tries, collections = [], []

    def capture_once(*args):
        tries.append(len(collections))
        if len(tries) == 1:
            try:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            except torch.OutOfMemoryError as error:
                raise timing.GraphUnavailable("graph capture ran out of memory") from error
        return "replay"

    monkeypatch.setattr(timing, "_capture_once", capture_once)
    monkeypatch.setattr(timing.gc, "collect", lambda: collections.append(1))
    assert timing.capture_graph(lambda: None, torch.device("cpu")) == "replay"
    assert tries == [0, 1]  # the second try came after one full collection


def test_a_capture_that_fails_otherwise_is_not_tried_again(monkeypatch):
    from lmperf.measure import timing

    tries, once = [], timing._capture_once

    def capture_once(*args):
        tries.append(1)
        return once(*args)  # on a CPU: "CUDA graphs need a CUDA device"

    monkeypatch.setattr(timing, "_capture_once", capture_once)
    with pytest.raises(timing.GraphUnavailable, match="need a CUDA device"):
        timing.capture_graph(lambda: None, torch.device("cpu"))
    assert tries == [1]


def test_a_cuda_device_where_none_is_visible_is_refused_with_the_setting_named(monkeypatch):
    from lmperf.measure.timing import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with pytest.raises(SystemExit, match=r"--device cuda: no CUDA GPU is visible here \(CUDA_VISIBLE_DEVICES=\)"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(SystemExit, match=r"--device cuda:1: torch \S+ is built without CUDA here"):
        resolve_device("cuda:1")
    assert resolve_device("auto") == resolve_device("cpu") == torch.device("cpu")
