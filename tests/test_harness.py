import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from lmperf.measure import Budget, harness, summarize_ms, write_rows
from lmperf.measure.flops import peak_tflops, step_flops
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.measure.stats import split_ms
from lmperf.model import model_config

CPU = torch.device("cpu")


def test_summarize_ms_against_hand_computed_values():
    stats = summarize_ms([0.010, 0.012, 0.014, 0.020])
    assert stats["mean_ms"] == pytest.approx(14.0)
    assert stats["median_ms"] == pytest.approx(13.0)
    assert stats["min_ms"] == pytest.approx(10.0)
    assert stats["max_ms"] == pytest.approx(20.0)
    assert stats["std_ms"] == pytest.approx(statistics.stdev([10, 12, 14, 20]))
    assert stats["cv"] == pytest.approx(statistics.stdev([10, 12, 14, 20]) / 14.0)
    with pytest.raises(ValueError):
        summarize_ms([])


def test_step_flops_formula():
    cfg = model_config("small", 128)
    n_mm = 12 * (4 * 768 * 768 + 3 * 768 * 3072) + 768 * 10_000
    forward = 2 * n_mm * 4 * 128 + 4 * 12 * 4 * 128**2 * 768
    assert step_flops(cfg, 4, 128, "forward") == forward
    assert step_flops(cfg, 4, 128, "train_step") == 3 * forward
    with pytest.raises(ValueError, match="unknown mode"):
        step_flops(cfg, 4, 128, "inference")


def test_peak_table_is_specific_first():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0
    assert peak_tflops("x86_64", "fp32") is None


def test_a_cpu_is_named_by_its_model(tmp_path):
    from lmperf.measure.env import cpu_model, device_name

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n")
    assert cpu_model(str(cpuinfo)) == "AMD EPYC 7B13 64-Core Processor"
    assert cpu_model(str(tmp_path / "absent")) != ""  # no cpuinfo: the platform's name, never empty
    proc = Path("/proc/cpuinfo")
    if proc.exists() and "model name" in proc.read_text():  # this machine names its model: rows carry it
        assert device_name(CPU) == cpu_model() and device_name(CPU) not in ("x86_64", "aarch64")


def test_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="precision"):
        BenchmarkSpec("nano", (16,), precision="fp8")
    with pytest.raises(ValueError, match="min_steps"):
        Budget(min_steps=0)
    with pytest.raises(ValueError, match="attentions"):
        BenchmarkSpec("nano", (16,), attentions=())
    with pytest.raises(ValueError, match="context_lengths"):
        BenchmarkSpec("nano", (0,))
    with pytest.raises(ValueError, match="warmup_windows"):  # windows of steps already timed, not warmed up
        BenchmarkSpec("nano", (16,), warmup_windows=(0, 2), graphed=False)
    with pytest.raises(ValueError, match="warmup_windows"):
        BenchmarkSpec("nano", (16,), warmup_steps=0, warmup_windows=(0, 2))


def test_warmup_windows_are_one_processs_steps_as_each_warmup_count_would_time_them():
    """The warm-up study: one process times max(windows) + min_steps steps, and count w's row has the
    first w as its warm-up and the min_steps after them as its timed steps, with its statistics."""
    spec = BenchmarkSpec(
        "nano", (8,), warmup_steps=0, warmup_windows=(0, 1, 3), graphed=False, budget=Budget(4, max_seconds=30)
    )
    rows = run_benchmark(spec, modes=("forward",), device=CPU)
    assert [r["warmup_steps"] for r in rows] == [0, 1, 3] and {r["status"] for r in rows} == {"ok"}
    assert {r["warmup_windows"] for r in rows} == {"0;1;3"}  # the report says how its rows were timed
    steps = [*split_ms(rows[-1]["warmup_times_ms"]), *split_ms(rows[-1]["step_times_ms"])]
    assert len(steps) == 3 + 4  # exactly the longest window's steps: no CI-driven extra steps
    for row, w in zip(rows, (0, 1, 3), strict=True):
        assert split_ms(row["step_times_ms"]) == steps[w : w + 4] and split_ms(row["warmup_times_ms"]) == steps[:w]
        assert row["median_ms"] == pytest.approx(statistics.median(steps[w : w + 4]), rel=1e-3)
        assert row["n_steps"] == 4 and row["first_step_ms"] == pytest.approx(steps[0], rel=1e-3)


def test_benchmark_rows_are_tidy():
    spec = BenchmarkSpec(
        "nano", (8, 16), precision="bf16", attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2)
    )
    rows = pd.DataFrame(run_benchmark(spec, device=CPU))
    assert list(zip(rows["context_length"], rows["mode"], rows["attention"])) == [
        (ctx, mode, attention)
        for ctx in (8, 16)
        for mode in ("forward", "forward_backward", "train_step")
        for attention in ("naive", "sdpa")
    ]
    assert (rows["status"] == "ok").all()
    assert (rows["median_ms"] > 0).all() and (rows["tokens_per_s"] > 0).all()
    assert (rows["ci95_low_ms"] <= rows["median_ms"]).all() and (rows["median_ms"] <= rows["ci95_high_ms"]).all()
    assert rows["step_times_ms"].str.count(";").eq(1).all()  # two measured steps kept
    # no CUDA graph on a CPU: the graphed value is empty and the note says why
    assert rows["graphed_median_ms"].isna().all()
    assert rows["note"].str.contains("CUDA graphs need a CUDA device").all()
    for column in (
        "device_name",
        "torch_version",
        "cuda_version",
        "triton_version",
        "driver_version",
        "host",
        "commit",
    ):
        assert column in rows.columns
    assert rows["params"].iloc[0] == 32 * 10_000 * 2 + 2 * (4 * 32 * 32 + 3 * 32 * 128 + 2 * 32) + 32


def test_the_train_step_steps_at_the_rate_its_rows_record(monkeypatch):
    """Steps on one repeated batch at AdamW's default rate made the 2.7B weights non-finite: e2e's
    optimizer takes the model's repeated-batch rate, and its rows say which (a rate the optimizer did
    not get fails this)."""
    made, make = [], harness.make_optimizer
    monkeypatch.setattr(harness, "repeated_batch_lr", lambda d_model: d_model / 128)
    monkeypatch.setattr(harness, "make_optimizer", lambda *a, **k: made.append(make(*a, **k)) or made[-1])
    spec = BenchmarkSpec("nano", (8,), warmup_steps=1, budget=Budget(2, max_steps=2))
    rows = pd.DataFrame(run_benchmark(spec, modes=("train_step",), device=CPU))
    assert [group["lr"] for group in made[0].param_groups] == [model_config("nano", 8).d_model / 128] == [0.25]
    assert (rows["lr"] == 0.25).all()


def test_out_of_memory_becomes_a_row(monkeypatch):
    def exploding_step(mode, *args):
        if mode == "train_step":

            def step():
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

            return step
        return lambda: None

    monkeypatch.setattr(harness, "make_step", exploding_step)
    rows = run_benchmark(BenchmarkSpec("nano", (8,), warmup_steps=0, budget=Budget(2, max_steps=2)), device=CPU)
    status = {r["mode"]: r["status"] for r in rows}
    assert status == {"forward": "ok", "forward_backward": "ok", "train_step": "oom"}
    assert "Tried to allocate" in rows[-1]["note"]
    windowed = BenchmarkSpec("nano", (8,), warmup_steps=0, warmup_windows=(0, 2), graphed=False, budget=Budget(2))
    rows = run_benchmark(windowed, modes=("forward", "train_step"), device=CPU)  # an oom row for each count too
    assert [(r["mode"], r["warmup_steps"], r["status"]) for r in rows] == [
        ("forward", 0, "ok"),
        ("forward", 2, "ok"),
        ("train_step", 0, "oom"),
        ("train_step", 2, "oom"),
    ]
    assert {r["warmup_windows"] for r in rows} == {"0;2"}


def test_out_of_memory_while_building_the_model(monkeypatch):
    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(harness, "build_model", no_memory)
    rows = run_benchmark(BenchmarkSpec("nano", (8, 16), budget=Budget(2, max_steps=2)), device=CPU)
    assert len(rows) == 6 and all(r["status"] == "oom" for r in rows)
    assert rows[0]["note"].startswith("model construction")
    windowed = BenchmarkSpec("nano", (8,), warmup_steps=0, warmup_windows=(0, 1, 5), graphed=False)
    rows = run_benchmark(windowed, modes=("forward",), device=CPU)
    assert [r["warmup_steps"] for r in rows] == [0, 1, 5] and all(r["status"] == "oom" for r in rows)


def test_write_rows_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    write_rows([{"a": 1, "status": "ok"}], path)
    before = path.read_text()

    def crash(self, f, **kwargs):
        f.write("a,sta")  # half a file, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", crash)
    with pytest.raises(KeyboardInterrupt):
        write_rows([{"a": 2, "status": "ok"}], path)
    assert path.read_text() == before  # the old result is intact
    assert os.listdir(tmp_path) == ["out.csv"]  # and no temporary file is left


# A process that starts writing a CSV and hangs inside the write, until it is stopped.
SLOW_WRITE = """
import sys, time
import pandas as pd
from lmperf.measure.rows import write_csv_atomic

def slow(self, f, **kwargs):
    f.write("a,sta")
    print("writing", flush=True)
    time.sleep(60)

pd.DataFrame.to_csv = slow
write_csv_atomic(pd.DataFrame({"a": [1]}), sys.argv[1])
"""


def test_a_job_terminated_while_writing_leaves_no_temporary_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITE, str(tmp_path / "out.csv")], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "writing"
    assert len(os.listdir(tmp_path)) == 1  # the temporary file, mid-write
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert os.listdir(tmp_path) == []  # neither the output nor its temporary file


def test_write_rows_requires_a_known_status(tmp_path):
    with pytest.raises(ValueError, match="status"):
        write_rows([{"a": 1, "status": "fine"}], tmp_path / "x.csv")
    assert not Path(tmp_path / "x.csv").exists()


def test_replays_take_turns_in_held_blocks_one_graph_at_a_time(monkeypatch):
    """On a CPU, with a stand-in capture (the launched step as its own "replay"): the launched steps of
    a point's variants are timed interleaved in one pass; then each variant's replays take TURNS turns,
    A B A B, block by block, each block held before it is timed and captured only once the last
    variant's graph is gone (one graph at a time), and each row carries its own turns."""
    from lmperf.measure import turns

    events, live = [], set()

    def capture(step, device, warmup_steps, after_warmup):
        assert not live, "a capture while another variant's graph is alive"
        live.add(step)
        events.append("capture")
        return step

    measured, held = turns.measure, turns.hold

    def timed(steps, *args, **kwargs):
        events.append(("time", *steps))
        return measured(steps, *args, **kwargs)

    def hold(step, device, seconds, **kwargs):
        events.append("hold")
        return held(step, device, seconds, **kwargs)

    monkeypatch.setattr(harness, "capture_graph", capture)
    monkeypatch.setattr(harness, "release_cached", lambda device: live.clear())
    monkeypatch.setattr(turns, "measure", timed)
    monkeypatch.setattr(turns, "hold", hold)
    spec = BenchmarkSpec(
        "nano", (8,), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(4, rel_halfwidth=0.5, max_seconds=0)
    )
    rows = {r["attention"]: r for r in run_benchmark(spec, modes=("forward",), device=CPU)}

    assert events == ["capture", "hold", ("time", "naive"), "capture", "hold", ("time", "sdpa")] * turns.TURNS
    for row in rows.values():
        assert row["status"] == "ok" and row["graphed_turns"] == turns.TURNS, row
        assert len(row["graphed_turn_ms"].split(";")) == turns.TURNS
        assert row["graphed_n_steps"] >= spec.budget.min_steps  # the blocks' steps pooled: each block runs half
        assert row["n_steps"] >= spec.budget.min_steps and row["graphed_median_ms"] > 0


def test_a_graph_that_cannot_be_captured_is_tried_once_and_named():
    """On a CPU no step can be captured: each row says why, with no graphed time and no turns."""
    spec = BenchmarkSpec("nano", (8,), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2))
    for row in run_benchmark(spec, modes=("forward",), device=CPU):
        assert row["status"] == "ok" and "CUDA graphs need a CUDA device" in row["note"]
        assert pd.isna(row["graphed_median_ms"]) and "graphed_turns" not in row


def sdpa_breaks_the_weights(monkeypatch, after: int = 0, mode: str | None = None, value: float = float("nan")):
    """A stand-in step: sdpa's steps (of ``mode``, or of every mode) set one weight to ``value`` from
    their (after + 1)-th call on, as naive attention compiled in bf16 once did at 2.7B."""
    make, use, current, calls = harness.make_step, harness.use_attention, {}, []
    monkeypatch.setattr(harness, "use_attention", lambda model, a: current.update(a=a) or use(model, a))

    def breaking(step_mode, model, *args, **kwargs):
        inner = make(step_mode, model, *args, **kwargs)

        def step():
            inner()
            if current["a"] == "sdpa" and mode in (None, step_mode):
                calls.append(1)
                if len(calls) > after:
                    with torch.no_grad():
                        model.lm_head.weight[0, 0] = value

        return step

    monkeypatch.setattr(harness, "make_step", breaking)


def test_a_variant_that_breaks_the_weights_is_an_error_row_and_the_rest_stay_finite(monkeypatch):
    """The variants share one model: a step that turns a weight into NaN would leave every later step
    timing a broken model (at 2.7B naive attention compiled in bf16 did, and the others then ran at a
    higher clock). The variant that broke it in its warm-up is an error row that says so, the initial
    weights come back, and the other variant and every later point are measured on finite weights."""
    sdpa_breaks_the_weights(monkeypatch, mode="train_step")
    spec = BenchmarkSpec("nano", (8, 16), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2))
    rows = pd.DataFrame(run_benchmark(spec, modes=("forward", "train_step"), device=CPU))
    broken = rows[(rows["mode"] == "train_step") & (rows["attention"] == "sdpa")]
    assert (broken["status"] == "error").all() and broken["note"].str.contains("non-finite").all()
    assert (rows.drop(broken.index)["status"] == "ok").all()  # naive's train step and every forward after
    assert list(rows["attention"]) == ["naive", "sdpa"] * 4  # rows keep the variants' order


def test_the_weights_are_drawn_once_however_often_they_are_restored(monkeypatch):
    """Drawing a 2.7B model's weights again took 20-29 s a restore: they are drawn on the first
    restore and kept, so a job whose variant breaks the weights at every point draws them once, and
    every restore brings back the same initial weights. (On a CPU the model is drawn on the device
    restore draws on, so this does not tell the two apart.)"""
    sdpa_breaks_the_weights(monkeypatch, mode="train_step")  # in its warm-up, at each of the two contexts
    drawn, restored, build, load = [], [], harness.build_model, torch.nn.Module.load_state_dict
    monkeypatch.setattr(harness, "build_model", lambda *a, **k: drawn.append(a[2]) or build(*a, **k))

    def loading(module, state, *args, **kwargs):
        restored.append({name: tensor.clone() for name, tensor in state.items()})
        return load(module, state, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "load_state_dict", loading)
    spec = BenchmarkSpec("nano", (8, 16), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2))
    run_benchmark(spec, modes=("train_step",), device=CPU)
    assert len(restored) == 2 and drawn == [CPU, CPU]  # the model, then the weights for both restores
    expected = build("nano", 16, CPU).state_dict()
    for state in restored:
        assert state.keys() == expected.keys() and all(torch.equal(state[k], expected[k]) for k in expected)


def test_a_timed_step_that_breaks_the_weights_is_found_by_timing_each_variant_alone(monkeypatch):
    """Broken during the timed steps, where the variants interleave: each variant is timed again alone
    from the initial weights; the one that breaks them is the error row, the other's row says it was
    timed alone, and the next point runs on finite weights."""
    sdpa_breaks_the_weights(monkeypatch, after=1, mode="train_step", value=float("inf"))  # past its warm-up
    spec = BenchmarkSpec("nano", (8,), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2))
    rows = pd.DataFrame(run_benchmark(spec, modes=("train_step", "forward"), device=CPU))
    assert list(rows["status"]) == ["ok", "error", "ok", "ok"]
    assert rows["note"].iloc[0].startswith(harness.ALONE) and "non-finite" in rows["note"].iloc[1]


def test_with_no_warm_up_nothing_runs_before_the_first_timed_step(monkeypatch):
    """The warm-up study's zero warm-up steps time the process's first step: the weights' check runs
    after a variant's warm-up steps only, never ahead of a cold first step."""
    events = []
    finite, measure = harness.finite, harness.measure
    monkeypatch.setattr(harness, "finite", lambda model: events.append("check") or finite(model))
    monkeypatch.setattr(harness, "measure", lambda *a, **k: events.append("measure") or measure(*a, **k))
    spec = BenchmarkSpec("nano", (8,), warmup_steps=0, budget=Budget(2, max_steps=2), graphed=False)
    run_benchmark(spec, modes=("train_step",), device=CPU)
    assert events[0] == "measure"


def test_a_variant_whose_replays_break_the_weights_is_the_error_row(monkeypatch):
    """Replays are timed in blocks of their own, so a block that broke the weights names its variant;
    the weights come back for the next block (stand-in capture: the launched step as its "replay")."""
    monkeypatch.setattr(harness, "capture_graph", lambda step, device, warmup_steps, after_warmup: step)
    sdpa_breaks_the_weights(monkeypatch, after=4)  # past its warm-up, two launched steps and the memory step
    spec = BenchmarkSpec(
        "nano", (8,), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, rel_halfwidth=0.5, max_steps=2)
    )
    naive, sdpa = run_benchmark(spec, modes=("train_step",), device=CPU)
    assert sdpa["status"] == "error" and sdpa["note"].endswith("in its replays")
    assert naive["status"] == "ok" and naive["graphed_turns"] == 2 and naive["graphed_median_ms"] > 0


def test_the_collector_is_paused_in_the_warm_up_and_on_again_after_even_out_of_memory(monkeypatch):
    """Warm-up steps run with Python's collector paused (no collection lands in their recorded time),
    and it is on again after the point, also when a variant's warm-up ran out of memory."""
    import gc

    paused, warmup_step = [], harness.warmup_step

    def recording(step, device):
        paused.append(not gc.isenabled())
        if len(paused) == 2:  # the second variant's first warm-up step
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return warmup_step(step, device)

    monkeypatch.setattr(harness, "warmup_step", recording)
    spec = BenchmarkSpec("nano", (8,), attentions=("naive", "sdpa"), warmup_steps=1, budget=Budget(2, max_steps=2))
    rows = {r["attention"]: r for r in run_benchmark(spec, modes=("forward",), device=CPU)}
    assert paused == [True, True]
    assert rows["naive"]["status"] == "ok" and rows["sdpa"]["status"] == "oom"
    assert gc.isenabled()
