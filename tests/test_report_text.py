"""The report reads right on any grid: tables render as GFM tables and fit a screen, ranges of one
value read as one value, direction words follow the sign, units agree within a sentence, and a run
with no GPU says nothing about GPUs and costs no GPU time."""

import re

import pandas as pd
import pytest

from conftest import table_problems
from lmperf.report import comm_section, cost, ladder_section, memory_section, precision_section, profile_section
from lmperf.report.markdown import change, num, pct, plural, span, table, time_unit


def test_a_range_of_one_value_is_one_value():
    assert span(1.0111, 1.0114, pct) == "101.1%"
    assert span(0.1, 0.25, pct) == "10.0%–25.0%"
    assert span(2.0, 2.004) == "2.00" and span(2.0, 3.0) == "2.00–3.00"


def test_direction_words_follow_the_sign():
    words = ("slows it by", "speeds it up by", "changes it by")
    assert change(0.1, 0.2, *words) == "slows it by 10.0%–20.0%"
    assert change(-0.109, -0.109, *words) == "speeds it up by 10.9%"  # never "slows it by -10.9%"
    assert change(-0.02, 0.04, *words) == "changes it by -2.0% to +4.0%"


def test_counts_agree_with_their_nouns_and_a_sentence_has_one_time_unit():
    assert plural(1, "warm-up step") == "1 warm-up step" and plural(2, "warm-up step") == "2 warm-up steps"
    assert time_unit([0.25, 0.6]) == (1e3, "µs")
    assert time_unit([0.25, 7.6]) == (1.0, "ms")  # one µs and one ms value: both in ms
    assert time_unit([1500, 2500]) == (1e-3, "s")


def test_a_quantity_with_no_value_is_a_dash_not_inf():
    assert num(float("inf")) == "—" and num(float("nan")) == "—" and pct(float("inf")) == "—"


def test_a_cell_or_header_holding_a_pipe_still_renders_as_a_table():
    frame = pd.DataFrame({"a": ["x|y", "z"], "|error|": ["1", "2"]})
    text = table(frame)
    assert table_problems(text) == []
    accumulation = pd.DataFrame(
        [
            {
                "accumulator": acc,
                "summand": summand,
                "summand_cast_to_accumulator": cast,
                "summand_stored": stored,
                "summand_value": 0.01,
                "result": result,
                "abs_error": abs(result - 10),
                "n_adds": 1000,
            }
            for acc, summand, cast, stored, result in (
                ("float32", "float32", False, 0.0099999998, 10.0001335144),
                ("float16", "float16", False, 0.0100021362, 9.953125),
                ("float32", "float16", False, 0.0100021362, 10.0021362305),
            )
        ]
    )
    autocast = pd.DataFrame(columns=["status", "tensor", "autocast_dtype", "dtype", "device", "note"])
    layernorm = pd.DataFrame(
        [
            {
                "dtype": "fp16",
                "d": 4096,
                "scale": 1.0,
                "mean_square": 1.0,
                "mean_square_rel_error": 1e-4,
                "output_finite": True,
                "output_rel_error": 1e-4,
            }
        ]
    )
    rendered = precision_section.render(accumulation, autocast, layernorm)
    assert "| \\|error\\|" in rendered and table_problems(rendered) == []


def test_the_table_checker_catches_a_broken_table_and_a_wide_one():
    assert table_problems("| a | b |error| |\n|:--|:--|\n| 1 | 2 |\n")  # a header of 4 cells over 2: no table
    assert table_problems("| a | b |\n|:--|:--|\n| 1 | 2 | 3 |\n")  # a row of 3 cells under 2
    assert table_problems(table(pd.DataFrame({"a": ["x" * 210]})))  # wider than a screen
    assert table_problems(table(pd.DataFrame({"a": ["x"]}))) == []


def write_job(root, job: str, seconds: float, device_type: str | None) -> str:
    """A measuring job's benchmark file, and its result file where ``device_type`` is given."""
    bench = root / "benchmarks" / f"{job}.tsv"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(f"s\th:m:s\n{seconds}\t0:00:01\n")
    if device_type is not None:
        result = root / "results" / f"{job}.csv"
        result.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"status": ["ok", "ok"], "device_type": [device_type] * 2}).to_csv(result, index=False)
    return str(bench)


def test_gpu_minutes_count_only_jobs_that_held_a_gpu(tmp_path):
    cpu_run = cost.collect(
        [
            write_job(tmp_path / "cpu", "e2e/nano/fp32-eager", 60, "cpu"),
            write_job(tmp_path / "cpu", "ddp/train-b4", 120, "cpu"),
        ],
        [1, 2],
    )
    assert list(cpu_run["gpus"]) == [0, 0] and cost.totals(cpu_run) == (3.0, 0.0)
    shown = cost.render(cpu_run)
    assert "GPU-minutes" not in shown and "no GPU time" in shown and table_problems(shown) == []

    gpu_run = cost.collect(
        [
            write_job(tmp_path / "gpu", "e2e/small/fp32-eager", 60, "cuda"),
            write_job(tmp_path / "gpu", "ddp/train-b4", 120, "cuda"),
            write_job(tmp_path / "gpu", "allreduce/gloo-n2", 30, "cpu"),
        ],
        [1, 2, 0],
    )
    assert list(gpu_run["gpus"]) == [1, 2, 0] and cost.totals(gpu_run)[1] == pytest.approx(5.0)
    assert "5.00 GPU-minutes" in cost.render(gpu_run)


def profile_frames(device_type: str, overhead: float):
    """One profiled point, forward and train step, its steps ``overhead`` slower under the profiler."""
    env = {"size": "nano", "context_length": 32, "status": "ok", "device_type": device_type, "device_name": "dev"}
    kernels = pd.DataFrame(
        [
            {
                **env,
                "mode": mode,
                "kernel": kernel,
                "category": category,
                "total_ms": ms,
                "range": "forward",
                "instances_per_step": 2,
                "profiler": "torch.profiler",
            }  # fmt: skip
            for mode in ("forward", "train_step")
            for kernel, category, ms in (("aten::mm", "gemm", 3.0), ("aten::mul", "elementwise", 1.0))
        ]
    )
    timing = pd.DataFrame(
        [
            {
                **env,
                "mode": mode,
                "step_ms": 10.0,
                "profiled_step_ms": 10.0 * (1 + overhead),
                "measured_steps": 2,
                "profiler_forward_ms": 5.0,
                "profiler_forward_basis": "host time of the forward range",
                "batch_size": 4,
            }  # fmt: skip
            for mode in ("forward", "train_step")
        ]
    )
    return kernels, timing


def test_profile_of_a_cpu_says_nothing_of_a_gpu_and_its_overhead_words_follow_the_sign():
    text = profile_section.render(*profile_frames("cpu", -0.109))
    assert "GPU busy" not in text and "kernel time" not in text and "operator" in text
    assert "by -" not in text and "faster under the profiler than without it, by 10.9%." in text
    assert table_problems(text) == []
    on_gpu = profile_section.render(*profile_frames("cuda", 0.158))
    busy = 4.0 / 2 / (10.0 * 1.158)  # kernel ms over the measured steps, per profiled step
    assert f"GPU busy, forward: {pct(busy)} of" in on_gpu and "The profiler slows the step by 15.8%." in on_gpu


def memory_rows(peaks: dict) -> pd.DataFrame:
    """Steady and first rows of the memory study: ``peaks`` maps (mode, precision) to the steady trace peak."""
    return pd.DataFrame(
        [
            {
                "mode": mode,
                "precision": precision,
                "context_length": 32,
                "state": state,
                "step": step,
                "trace_peak_mib": peak * (0.8 if state == "first" else 1),
                "allocator_peak_mib": float("nan"),
                "status": "ok",
                "size": "nano",
                "batch_size": 4,
                "steps": 2,
                "profiler": "torch_profiler",
                "device_name": "AMD EPYC",
                "commit": "abc",
            }  # fmt: skip
            for (mode, precision), peak in peaks.items()
            for state, step in (("first", 1), ("steady", 2))
        ]
    )


def test_the_bf16_peak_is_said_to_be_higher_or_lower_as_its_numbers_are():
    higher = memory_section.render(
        memory_rows({("train_step", "fp32"): 23.5, ("train_step", "bf16"): 23.7}), pd.DataFrame()
    )
    assert "the bf16 peak is 101% of the fp32 peak (context 32), higher." in higher
    assert "shrinks" not in higher and "101%–101%" not in higher
    lower = memory_section.render(memory_rows({("forward", "fp32"): 7.5, ("forward", "bf16"): 5.7}), pd.DataFrame())
    assert "the bf16 peak is 76% of the fp32 peak (context 32), lower." in lower
    assert "allocator" not in higher + lower  # no allocator statistics on a CPU: no column, no word
    assert table_problems(higher) == [] and table_problems(lower) == []


def test_the_memory_check_against_e2e_runs_on_a_cpu_from_the_trace_peaks():
    memory = memory_rows({("train_step", "fp32"): 29.64})
    e2e = pd.DataFrame(
        [
            {
                "size": "nano",
                "precision": "fp32",
                "context_length": 32,
                "mode": "train_step",
                "compile": "eager",
                "attention": "naive",
                "status": "ok",
                "peak_mem_gib": 29.64 / 1024,
                "commit": "abc",
            }
        ]  # fmt: skip
    )
    text = memory_section.render(memory, pd.DataFrame(), e2e)
    assert "Cross-check: the steady-state trace peak here" in text and "**met**" in text
    assert "measured none of these points" not in text


def test_one_all_reduce_sentence_keeps_one_unit():
    rows = pd.DataFrame(
        [
            {
                "backend": "gloo",
                "world_size": 2,
                "bytes": b,
                "median_ms": ms,
                "ci95_low_ms": ms,
                "ci95_high_ms": ms,
                "min_ms": ms,
                "cv": 0.1,
                "algbw_gbps": 1.0,
                "busbw_gbps": 1.0,
                "warmup": 20,
                "iters": 100,
                "status": "ok",
                "note": "",
                "device_name": "AMD EPYC",
            }  # fmt: skip
            for b, ms in ((1024, 0.2472), (2**20, 7.66))
        ]
    )
    text = comm_section.render(rows, pd.DataFrame())
    sentence = next(line for line in text.splitlines() if line.startswith("- gloo"))
    assert "µs" not in sentence and "0.247 ms at 1 KiB" in sentence and "7.660 ms at 1 MiB" in sentence
    assert "CUDA events" not in text


def test_a_ladder_held_for_no_seconds_does_not_say_it_was_held_for_seconds():
    from test_ladder import _point

    point = _point({"baseline": [30.0, 31, 29], "bf16": [36.0, 37, 35], "torch_stack": [34.0, 35, 33]})
    point["launched_turns"], point["launched_settle_steps"] = 2, 2.0
    text = ladder_section.render(point)
    assert "few seconds" not in text and "runs 1 untimed step, then is timed" in text
    assert "CUDA graph;" not in text  # no rung was replayed
    assert "Largest single gain" not in text  # bf16 is slower than baseline: no gain to call largest
    assert re.search(r"No rung is faster than the one before it; the least slowdown is `bf16`", text)
    assert table_problems(text) == []


def test_every_empty_figure_says_which_figure_and_why(tmp_path, monkeypatch):
    from lmperf.report import ddp_figures, e2e_figures, flash_figures

    drawn = []

    def spy(path, title, reason):
        drawn.append((path.name if hasattr(path, "name") else str(path), title, reason))

    for module in (e2e_figures, ddp_figures, flash_figures):
        monkeypatch.setattr(module, "not_drawn", spy)
    cpu = pd.DataFrame(
        [
            {
                "attention": "naive",
                "size": "nano",
                "params": 1e6,
                "context_length": 32,
                "precision": p,
                "compile": "eager",
                "mode": m,
                "status": "ok",
                "median_ms": 5.0,
                "graphed_median_ms": float("nan"),
                "commit": "abc",
            }  # fmt: skip
            for p in ("fp32", "bf16")
            for m in ("forward", "forward_backward", "train_step")
        ]
    )
    e2e_figures.time_vs_size(cpu, tmp_path / "a.png")
    e2e_figures.ratio_vs_size(cpu, tmp_path / "b.png")
    e2e_figures.bf16_speedup(cpu, tmp_path / "c.png")
    e2e_figures.host_overhead(cpu, tmp_path / "d.png")
    skipped = pd.DataFrame([{"study": "ddp_timeline", "status": "skipped", "note": "a kernel timeline needs CUDA"}])
    ddp_figures.timeline(skipped, tmp_path / "e.png")
    flash_figures.tflops_vs_seq(pd.DataFrame([{"status": "skipped", "note": "needs a CUDA GPU"}]), tmp_path / "f.png")
    titles = [title for _, title, _ in drawn]
    assert len(drawn) == 6 and len(set(titles)) == 6  # each placeholder names its own figure
    assert all("CUDA" in reason for _, _, reason in drawn)  # and says why it is empty


def test_a_placeholder_is_a_png_with_no_axes_to_misread(tmp_path):
    from lmperf.report.style import not_drawn

    not_drawn(tmp_path / "x.png", "Some figure", "no rows")
    not_drawn(tmp_path / "y.png", "Another figure", "no rows")
    x, y = (tmp_path / "x.png").read_bytes(), (tmp_path / "y.png").read_bytes()
    assert x[:8] == b"\x89PNG\r\n\x1a\n" and x != y


def test_the_attention_legend_tells_eager_from_compiled():
    from lmperf.report.attention_figures import legend_handles

    handles = {h.get_label(): h for h in legend_handles({16: "C0", 32: "C1"}, ["eager", "compiled"])}
    assert set(handles) == {"d = 16", "d = 32", "eager", "compiled"}
    eager, compiled = handles["eager"], handles["compiled"]
    assert eager.get_linestyle() != compiled.get_linestyle() and eager.get_marker() != compiled.get_marker()


def test_the_ladder_is_checked_against_the_e2e_rows_of_the_same_step():
    """A launched rung and the e2e train step with the same size, context, batch, precision, compile
    mode (the ladder's per-block compile is e2e's "compiled"), attention and optimizer are paired,
    graphed where both replayed; rungs with no e2e twin (bf16 weights, torch's AdamW) are not."""
    from lmperf.report import ladder_section

    step = {"size": "xl", "context_length": 512, "batch_size": 4, "precision": "bf16", "status": "ok"}
    ladder = pd.DataFrame(
        [
            {**step, "rung": "compile", "order": 2, "compile": "blocks", "attention": "naive", "optimizer": "lmperf"},
            {
                **step,
                "rung": "flash",
                "order": 3,
                "compile": "blocks",
                "attention": "flash_triton",
                "optimizer": "lmperf",
            },
            {
                **step,
                "rung": "torch",
                "order": 4,
                "compile": "blocks",
                "attention": "flash_triton",
                "optimizer": "torch_fused",
            },
        ]
    ).assign(graphed=False, weights="fp32", median_ms=[140.0, 130.0, 120.0], graphed_median_ms=[133.0, 123.0, 110.0])
    e2e = pd.DataFrame(
        [
            {
                **step,
                "compile": "compiled",
                "attention": a,
                "optimizer": "lmperf",
                "mode": m,
                "median_ms": 150.0,
                "graphed_median_ms": g,
            }
            for a, g in (("naive", 133.0 / 1.01), ("flash_triton", 123.0 / 0.95))
            for m in ("forward", "train_step")
        ]
    )
    pairs = ladder_section.against_e2e(ladder, e2e)
    assert list(pairs["rung"]) == ["compile", "flash"] and set(pairs["timing"]) == {"graphed"}
    assert list(pairs["ratio"]) == pytest.approx([1.01, 0.95])
    said = " ".join(ladder_section.agreement(ladder, e2e))
    assert "differ by at most 5.0%: rung `flash` at xl, context 512, takes 0.95× e2e's time (graphed)" in said
