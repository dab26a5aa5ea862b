"""The profiling study: the torch.profiler path end to end on the CPU, the nsys path's parser on recorded
`nsys stats` CSVs, and the answers computed from either."""

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import torch

from lmperf.measure import nsys
from lmperf.measure.kernels import kernel_table, spans_by_name
from lmperf.model import model_config
from lmperf.report import profile_section
from lmperf.studies import profile

STEPS = 2


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """One job, both modes: as the pipeline profiles a size."""
    out = tmp_path_factory.mktemp("profile") / "nano.csv"
    argv = ["--size", "nano", "--context-lengths", "32", "--modes", "forward,train_step", "--warmup-steps", "1"]
    profile.main([*argv, "--measured-steps", str(STEPS), "--device", "cpu", "--out", str(out)])
    return pd.read_csv(out), pd.read_csv(out.with_name("nano-timing.csv"))


def test_work_is_attributed_to_nested_ranges_of_measured_steps_only(tables):
    kernels, _ = tables
    train = kernels[kernels["mode"] == "train_step"]
    assert {"forward", "backward", "optimizer step"} <= set(train["range"])
    assert {"forward/attention scores", "forward/softmax", "forward/final matmul"} <= set(kernels["range"])
    assert "aten::exp" in set(kernels.loc[kernels["range"] == "forward/softmax", "kernel"])
    # one matmul per linear layer: 7 per block (q, k, v, o, three SwiGLU) and the LM head, per measured step only
    layers = model_config("nano", 32).num_layers
    forward = kernels[
        (kernels["mode"] == "forward") & (kernels["range"] == "forward") & (kernels["kernel"] == "aten::mm")
    ]
    assert forward["instances"].item() == STEPS * (7 * layers + 1)
    assert (kernels["profiler"] == "torch.profiler").all() and (kernels["category"] != "").all()


def test_answers_from_the_tables(tables):
    kernels, timing = tables
    row = profile_section.answers(kernels, timing).iloc[0]
    assert row["plain_forward_ms"] > 0 and row["profiler_forward_ms"] > 0
    assert 0 < row["busy_forward"] <= 1.05 and 0 < row["busy_train_step"] <= 1.05  # operator time within the step
    assert 0 < row["gemm_share_forward"] <= 1 and 0 < row["gemm_share_train"] <= 1
    d_head = model_config("nano", 32).d_head
    assert row["softmax_flop_ratio"] == pytest.approx(5 / (4 * d_head))
    assert row["top_forward"] in set(kernels["kernel"])
    text = profile_section.render(kernels, timing)
    assert "## Profiling" in text and "torch.profiler" in text and "(e) softmax takes" in text


# Recorded on an H100 (see its README): nano, ctx 32, one warm-up and one measured train step.
NSYS_FIXTURE = Path(__file__).parent / "data" / "nsys-nano-train_step"


@pytest.fixture(scope="module")
def nsys_stats():
    paths = {name: NSYS_FIXTURE / f"{name}.csv.gz" for name in nsys.REPORTS}
    activities, nvtx_ranges = nsys.read_stats(paths)
    spans = spans_by_name(nvtx_ranges)
    table = kernel_table(
        zip(activities["launch"], activities["name"], activities["end"] - activities["start"]), spans, 1
    )
    raw = {name: pd.read_csv(path) for name, path in paths.items()}
    return activities, spans, table, raw


def test_nsys_range_names_lose_their_domain_and_operator_ids():
    assert nsys.range_name(":forward") == "forward"
    assert nsys.range_name(":forward, op_id = 208") == "forward"  # record_function under autograd-nvtx
    assert nsys.range_name("CCCL:cub::DeviceRadixSort") == "cub::DeviceRadixSort"
    assert nsys.range_name("aten::mm") == "aten::mm"


def test_nsys_kernel_table_counts_the_measured_step_only(nsys_stats):
    activities, spans, table, raw = nsys_stats
    # Independently of the parser: GPU activities whose launching API call started inside the one
    # measured step's NVTX range.
    ranges, api, gpu = raw["nvtx_pushpop_trace"], raw["cuda_api_trace"], raw["cuda_gpu_trace"]
    step = ranges[ranges["Name"] == ":measured step"].iloc[0]
    launched = api.loc[api["Start (ns)"].between(step["Start (ns)"], step["End (ns)"]), "CorrID"]
    in_step = gpu[gpu["CorrId"].isin(launched)]
    assert table["instances"].sum() == len(in_step)
    assert table["total_ms"].sum() == pytest.approx(in_step["Duration (ns)"].sum() / 1e6)
    assert len(in_step) < len(gpu) / 2  # the warm-up step (and model set-up) was left out
    assert set(table["range"]) == {
        "forward",
        "forward/attention scores",
        "forward/softmax",
        "forward/final matmul",
        "backward",
        "optimizer step",
    }
    assert (table.loc[table["range"] == "optimizer step", "category"] == "optimizer").any()
    assert (table.loc[table["range"] == "backward", "category"] == "gemm").any()


def test_nsys_forward_span_covers_its_kernels_within_the_step(nsys_stats):
    activities, spans, table, _ = nsys_stats
    span = profile.forward_spans_ms(activities, spans, steps=1)
    kernel_time = table.loc[table["range"].str.startswith("forward"), "total_ms"].sum()
    (step_start,), (step_end,) = spans["measured step"]
    assert kernel_time < span < (step_end - step_start) / 1e3


def test_nsys_requested_where_there_is_none_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(nsys, "executable", lambda: None)
    with pytest.raises(SystemExit, match="no nsys on PATH"):
        profile.choose_profiler("nsys", torch.device("cpu"))
    assert profile.choose_profiler("auto", torch.device("cpu")) == "torch"


@pytest.mark.parametrize(
    "kernel, short",
    [
        (
            "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::"
            "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>(at::Tensor",
            "elementwise_kernel [MulFunctor]",
        ),
        (
            "void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float, "
            "at::native::MeanOps<float, float, "
            "float, float>, unsigned int, float, (int)4, (int)4>>(T3)",
            "reduce_kernel [MeanOps]",
        ),
        (
            "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)4>, "
            "at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4>>(T1, T2, T3...)",
            "multi_tensor_apply_kernel [FusedAdamMathFunctor]",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
            "cutlass_80_simt_sgemm_256x128_8x4_nn_align1",
        ),
        ("[CUDA memcpy Device-to-Device]", "[CUDA memcpy Device-to-Device]"),
        ("aten::mm", "aten::mm"),
    ],
)
def test_kernel_names_are_shortened_to_what_they_do(kernel, short):
    assert profile_section.short_name(kernel) == short


def test_profiler_forward_is_checked_against_the_e2e_study(tables):
    """The check compares with an independent measurement (the e2e study's unprofiled run), so it can fail."""
    kernels, timing = tables
    profiled = timing.set_index("mode").loc["forward", "profiler_forward_ms"]
    e2e = pd.DataFrame(
        [
            {
                "attention": "naive",
                "precision": "fp32",
                "compile": "eager",
                "size": "nano",
                "context_length": 32,
                "mode": "forward",
                "status": "ok",
                "median_ms": profiled / 2,
                "graphed_median_ms": profiled / 4,
            }
        ]
    )
    row = profile_section.answers(kernels, timing, e2e).iloc[0]
    assert row["agreement"] == pytest.approx(1.0)  # the profiler's forward is twice the unprofiled median
    text = profile_section.render(kernels, timing, e2e)
    assert "differs from the e2e study's unprofiled launched median by up to 100.0%" in text
    assert "and is 4.00× its graphed median" in text
    other = e2e.assign(precision="bf16")  # another configuration is not the same point
    assert "agreement" not in profile_section.answers(kernels, timing, other)


def test_a_point_profiled_in_one_mode_still_names_its_top_kernel(tables):
    """A grid that has profiled one mode of a point but not yet the other (a run stopped between
    slices) still answers (b) for the mode it has, and claims nothing of the other."""
    kernels, timing = tables

    def line(mode: str) -> str:
        text = profile_section.render(kernels[kernels["mode"] == mode], timing[timing["mode"] == mode])
        return next(line for line in text.splitlines() if line.startswith("- nano, context 32:"))

    assert "leads the forward pass" in line("forward") and "train step" not in line("forward")
    assert "leads the train step; the forward pass is not profiled" in line("train_step")
    assert "the train step is led by" in profile_section.render(kernels, timing)


def test_a_step_out_of_memory_is_the_points_oom_row_and_the_job_goes_on(tmp_path, monkeypatch):
    """measure() drops a step that runs out of memory; the study must not then read an empty profile
    (on nsys that failed the job: "no 'measured step' range") but write the point as out of memory,
    and profile the job's other points."""
    build = profile.build_step

    def step():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")

    monkeypatch.setattr(
        profile, "build_step", lambda args, device: step if args.mode == "train_step" else build(args, device)
    )
    out = tmp_path / "nano.csv"
    argv = ["--size", "nano", "--context-lengths", "32", "--modes", "train_step,forward", "--measured-steps", "2"]
    profile.main([*argv, "--warmup-steps", "1", "--device", "cpu", "--out", str(out)])
    for path in (out, tmp_path / "nano-timing.csv"):
        rows = pd.read_csv(path)
        oom = rows[rows["mode"] == "train_step"].iloc[0]
        assert oom["status"] == "oom" and "Tried to allocate 12.00 GiB" in oom["note"]
        assert (rows.loc[rows["mode"] == "forward", "status"] == "ok").all() and (rows["mode"] == "forward").any()


def test_one_nsys_report_is_cut_into_its_points_by_their_ranges(nsys_stats):
    """A job's report holds every point, each inside its "point <mode> ctx<n>" range: a point's table
    is the work launched inside its own range, as if it had been profiled alone."""
    activities, spans, alone, _ = nsys_stats
    ranges = nsys.read_stats({n: NSYS_FIXTURE / f"{n}.csv.gz" for n in nsys.REPORTS})[1]
    first, last = min(s for _, s, _ in ranges), max(e for _, _, e in ranges)
    shift = last - first + 1e3
    later = activities.assign(**{c: activities[c] + shift for c in ("launch", "start", "end")})
    two_points = pd.concat([activities, later], ignore_index=True)
    two_ranges = [
        ("point train_step ctx32", first, last),
        *ranges,
        ("point train_step ctx64", first + shift, last + shift),
        *[(name, s + shift, e + shift) for name, s, e in ranges],
    ]
    for name in ("point train_step ctx32", "point train_step ctx64"):
        table, forward = profile.point_tables(two_points, two_ranges, name, steps=1)

        def rows(t):
            return t.sort_values(["range", "kernel"]).reset_index(drop=True)

        pd.testing.assert_frame_equal(rows(table), rows(alone))
        assert forward == pytest.approx(profile.forward_spans_ms(activities, spans, steps=1))
    with pytest.raises(RuntimeError, match="ctx128"):
        profile.point_tables(two_points, two_ranges, "point train_step ctx128", steps=1)


@pytest.fixture
def nsys_on_cpu(monkeypatch):
    """The nsys path with nsys played on a CPU: the child runs in this process, each point's NVTX range
    is recorded with its times, and the "report" holds one measured step and one kernel inside each
    point's range. Yields the recorded point ranges."""
    windows = []

    @contextmanager
    def point(name):
        start = time.perf_counter() * 1e6
        yield
        windows.append((name, start, time.perf_counter() * 1e6))

    def report(nsys_path, path):
        ranges = [r for name, s, e in windows for r in ((name, s, e), ("measured step", s + 1, e - 1))]
        kernels = [(s + 2, s + 3, s + 4, "ampere_sgemm_128x64_tn") for _, s, _ in windows]
        return pd.DataFrame(kernels, columns=["launch", "start", "end", "name"]), ranges

    def run(command, **_):  # [report, python, -m, lmperf.studies.profile, *argv]
        profile.main(command[4:])
        Path(command[0]).touch()
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(profile.torch.cuda.nvtx, "range", point)
    monkeypatch.setattr(profile.nsys, "executable", lambda: "nsys")
    monkeypatch.setattr(profile.nsys, "profile_command", lambda nsys_path, report, command, _: [str(report), *command])
    monkeypatch.setattr(profile.nsys, "read_report", report)
    monkeypatch.setattr(profile.subprocess, "run", run)
    return windows


def test_the_nsys_path_profiles_every_point_in_one_child_and_writes_each_as_it_went(tmp_path, monkeypatch, nsys_on_cpu):
    """One child profiles every point, each in its own range; the parent cuts the report at them and
    times each point again. A point that ran out of memory in the child is its oom row, not timed again."""
    build = profile.build_step

    def build_step(args, device):
        if (args.mode, args.context_length) == ("train_step", 64):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return build(args, device)

    monkeypatch.setattr(profile, "build_step", build_step)
    out = tmp_path / "profile" / "nano.csv"  # a folder that does not exist yet
    argv = ["--size", "nano", "--context-lengths", "32,64", "--modes", "forward,train_step", "--profiler", "nsys"]
    profile.main([*argv, "--warmup-steps", "1", "--measured-steps", "2", "--device", "cpu", "--out", str(out)])
    assert [name for name, _, _ in nsys_on_cpu] == [
        "point forward ctx32",
        "point forward ctx64",
        "point train_step ctx32",
        "point train_step ctx64",
    ]
    timing = pd.read_csv(out.with_name("nano-timing.csv")).set_index(["mode", "context_length"])
    assert timing["status"].to_dict() == {
        ("forward", 32): "ok",
        ("forward", 64): "ok",
        ("train_step", 32): "ok",
        ("train_step", 64): "oom",
    }
    assert "Tried to allocate 3.00 GiB" in timing.loc[("train_step", 64), "note"]
    assert (timing.loc[timing["status"] == "ok", ["step_ms", "profiled_step_ms"]] > 0).all().all()
    kernels = pd.read_csv(out)
    ok = kernels[kernels["status"] == "ok"]
    assert len(ok) == 3 and (ok["instances"] == 1).all()  # each point's one kernel, from its own range alone
    assert out.with_name("nano.nsys-rep").exists()


def test_a_child_that_dies_leaves_error_rows_that_say_so(tmp_path, monkeypatch, nsys_on_cpu):
    monkeypatch.setattr(
        profile.subprocess,
        "run",
        lambda command, **_: Path(command[0]).touch() or subprocess.CompletedProcess(command, -9),
    )
    out = tmp_path / "2.7B.csv"
    argv = ["--size", "nano", "--context-lengths", "32", "--modes", "forward", "--profiler", "nsys", "--device", "cpu"]
    profile.main([*argv, "--out", str(out)])
    row = pd.read_csv(out).iloc[0]
    assert row["status"] == "error" and "exited with code -9" in row["note"]
    assert out.with_name("2_7B.nsys-rep").exists()  # no dot but the extension's: nsys names its report by the stem


def test_a_point_named_twice_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        profile.main(["--size", "nano", "--context-lengths", "32,32", "--modes", "forward", "--out", "x.csv"])
    assert "argument --context-lengths: 32 named twice in '32,32'" in capsys.readouterr().err


def test_nsys_adds_operator_ranges_only_when_asked(monkeypatch):
    """Per-operator ranges (autograd-nvtx) are for reading a report in the GUI; the tables cut at
    lmperf's own ranges, so the pipeline's reports go without them unless asked."""
    monkeypatch.setattr(profile.nsys, "supports_autograd_nvtx", lambda nsys_path: True)
    plain = profile.nsys.profile_command("nsys", Path("r.nsys-rep"), ["python"])
    asked = profile.nsys.profile_command("nsys", Path("r.nsys-rep"), ["python"], operator_ranges=True)
    assert "--pytorch=autograd-nvtx" not in plain
    assert "--pytorch=autograd-nvtx" in asked
    assert plain[-1] == asked[-1] == "python"


@pytest.mark.parametrize("flag", [[], ["--operator-ranges"]])
def test_the_study_asks_nsys_for_operator_ranges_only_with_its_flag(tmp_path, monkeypatch, flag):
    asked = []

    class Asked(Exception):
        pass

    def profile_command(nsys_path, report, command, operator_ranges):
        asked.append(operator_ranges)
        raise Asked

    monkeypatch.setattr(profile.nsys, "executable", lambda: "nsys")
    monkeypatch.setattr(profile.nsys, "profile_command", profile_command)
    argv = ["--size", "nano", "--context-lengths", "32", "--modes", "forward", "--profiler", "nsys", "--device", "cpu"]
    with pytest.raises(Asked):
        profile.main([*argv, *flag, "--out", str(tmp_path / "nano.csv")])
    assert asked == [bool(flag)]
