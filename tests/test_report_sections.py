"""Report sections for GPU-only studies, rendered from constructed rows (CI has no GPU to make real ones)."""

import re

import pandas as pd
import pytest

from conftest import ROOT
from lmperf import grid
from lmperf.report import flash_figures, flash_section

ENV = {"device_name": "NVIDIA H100 80GB HBM3", "torch_version": "2.11.0", "commit": "abc"}


def leaderboard_frame():
    times = {
        ("ours_triton", "forward"): 2.0,
        ("ours_triton", "forward_backward"): 5.0,
        ("sdpa_flash", "forward"): 2.5,
        ("sdpa_flash", "forward_backward"): 7.0,
        ("sdpa_cudnn", "forward"): 1.5,
        ("sdpa_cudnn", "forward_backward"): 4.5,
    }
    return pd.DataFrame(
        [
            {
                "implementation": impl,
                "pass": pass_,
                "median_ms": ms,
                "tflops": 100 / ms,
                "rel_diff_vs_sdpa_flash": 1e-3,
                "warmup_ms": 1000,
                "rep_ms": 10000,
                "status": "ok",
                "note": "",
                **ENV,
            }
            for (impl, pass_), ms in times.items()
        ]
    )


def sweep_row(impl: str, pass_: str, seq: int, **columns) -> dict:
    """One measured bf16 sweep row at d = 64."""
    return {"implementation": impl, "pass": pass_, "seq": seq, "d": 64, "dtype": "bf16", "status": "ok", "note": "",
            **columns, **ENV}  # fmt: skip


def sweep_frame():
    rows = []
    for seq in (1024, 2048):
        for impl in ("ours_triton", "naive"):
            for pass_ in ("forward", "backward", "forward_backward"):
                ms = seq / 1000 * (2 if impl == "naive" else 1)
                rows.append(sweep_row(impl, pass_, seq, median_ms=ms, tflops=50.0, peak_mem_gib=seq / 1024 * 0.01))
    rows.append(
        {
            "implementation": "naive",
            "pass": "forward_backward",
            "seq": 65536,
            "d": 64,
            "dtype": "bf16",
            "status": "oom",
            "note": "CUDA out of memory",
            **ENV,
        }
    )
    rows.append(
        {
            "implementation": "sdpa_flash",
            "pass": "forward",
            "seq": 1024,
            "d": 64,
            "dtype": "fp32",
            "status": "skipped",
            "note": "No available kernel",
            **ENV,
        }
    )
    return pd.DataFrame(rows)


def test_leaderboard_section_states_the_measured_ratios():
    text = flash_section.render(leaderboard_frame(), sweep_frame())
    assert "| ours_triton      | forward + backward | 5.000" in text
    ratio = float(
        re.search(
            r"Forward \+ backward, launched: ours takes 5\.000 ms, ([\d.]+)× the speed of sdpa_flash", text
        ).group(1)
    )
    assert ratio == pytest.approx(7.0 / 5.0, abs=0.005)
    assert "faster than it" in text and "slower than it" in text  # faster than flash, slower than cuDNN


def test_leaderboard_section_states_the_flop_convention_its_rates_use():
    """The section says how TFLOP/s count, and its table's rates follow that count."""
    from lmperf.measure.attention_flops import attention_flops

    text = flash_section.render(leaderboard_frame(), sweep_frame())
    assert "halved when causal; the backward 2.5× the forward, forward + backward 3.5×." in text
    assert attention_flops(2, 8, 4, True, "forward_backward") == 3.5 * 4 * 2 * 8 * 8 * 4 / 2


def graphed(frame, gpu_ms):
    """The frame with graphed columns: gpu_ms(row) as the replayed time."""
    frame = frame.copy()
    frame["graphed_median_ms"] = [gpu_ms(row) if row.status == "ok" else float("nan") for row in frame.itertuples()]
    frame["host_bound"] = frame["median_ms"] > 1.1 * frame["graphed_median_ms"]
    return frame


def test_leaderboard_section_compares_graphed_times_too():
    frame = graphed(leaderboard_frame(), lambda row: row.median_ms / 2 if row.implementation == "ours_triton" else 4.0)
    text = flash_section.render(frame, sweep_frame())
    assert "graphed (ms)" in text and "| 2.500" in text  # ours' forward + backward, replayed
    assert "Forward + backward, replayed as a CUDA graph: ours takes 2.500 ms, 1.60× the speed of sdpa_cudnn" in text
    assert "Forward + backward, launched: ours takes 5.000 ms" in text


def test_sweep_uses_graphed_times_and_counts_host_bound_rows():
    frame = sweep_frame()
    frame.loc[frame["seq"] == 2048, "seq"] = 4096
    flash = frame[frame["implementation"] == "ours_triton"].assign(implementation="sdpa_flash")
    frame = graphed(pd.concat([frame, flash]), lambda row: 0.5 if row.implementation == "ours_triton" else 1.0)
    frame.loc[(frame["implementation"] == "sdpa_flash") & (frame["pass"] == "backward"), "graphed_median_ms"] = 0.4
    text = flash_section.render(leaderboard_frame(), frame)
    assert "**forward + backward (ms, replayed as a CUDA graph), bf16, d = 64**" in text
    assert re.search(r"\| 4096\s+\| 1\.000\s+\| 0\.500\s+\| 1\.000", text)  # naive, ours, sdpa_flash
    timed = frame[(frame["dtype"] == "bf16") & frame["graphed_median_ms"].notna()]
    assert f"{int(timed['host_bound'].sum())} of {len(timed)} graphed rows are host-bound" in text
    assert (
        "ours is at least as fast as sdpa_flash at 2 of 3 (pass, seq) points; its lowest speed ratio there is 0.80×"
        in text
    )
    assert "Up to seq" not in text  # the launched-time heuristic gives way to the measured column


def test_sweep_section_tables_memory_and_failures():
    text = flash_section.render(leaderboard_frame(), sweep_frame())
    assert "**forward + backward (ms), bf16, d = 64**" in text
    assert re.search(r"\| 2048\s+\| 4\.096\s+\| 2\.048", text)  # naive then ours_triton, from the rows
    assert "×2.00 for ×2.00 the sequence (at most linear in sequence length; an N² buffer would grow ×4.00)" in text
    assert "naive bf16: oom" in text and "sdpa_flash fp32: skipped" in text


def test_sweep_names_the_implementations_it_left_out_and_why():
    frame = sweep_frame()
    left = [name for name in grid.FLASH_IMPLEMENTATIONS if name not in set(frame["implementation"])]
    assert len(left) > 1 and "ours_pytorch" in left  # the fixture times naive and ours_triton (sdpa_flash skipped)
    text = flash_section.render(leaderboard_frame(), frame)
    assert f"This run's sweep did not time {', '.join(left)} (not in its `flash.sweep.implementations`)." in text
    assert "the full grid leaves out" not in text  # another list than the full grid's: no reason of its
    every = pd.concat([frame.iloc[:1].assign(implementation=name) for name in left] + [frame])
    assert "did not time" not in flash_section.render(leaderboard_frame(), every)
    full_grid = every[every["implementation"] != "ours_pytorch"]
    text = flash_section.render(leaderboard_frame(), full_grid)
    assert (
        "This run's sweep did not time ours_pytorch (not in its `flash.sweep.implementations`: the full grid " in text
    )
    assert "`wide.yaml` times it)." in text


def test_sweep_compares_ours_with_the_fastest_other_at_the_longest_sequence():
    frame = sweep_frame()
    frame.loc[
        (frame["implementation"] == "naive") & (frame["seq"] == 2048) & (frame["pass"] == "backward"), "median_ms"
    ] = 1.024
    text = flash_section.render(leaderboard_frame(), frame)
    # ours 2.048 ms in each pass; naive 4.096 ms, except its backward now 1.024 ms (ours 0.5x its speed)
    assert (
        "At seq 2048, ours_triton against the fastest other implementation: forward 2.048 ms against naive's "
        "4.096 ms (2.00× the speed); backward 2.048 ms against naive's 1.024 ms (0.50× the speed); "
        "forward + backward 2.048 ms against naive's 4.096 ms (2.00× the speed)."
    ) in text


def rounds_frame(bound=1.25):
    """A sweep timed in rounds: ours, SDPA flash and cuDNN, forward + backward, at three lengths where
    ours is within ``bound`` of the faster backend, above it, and neither resolved."""
    rounds = {  # per length: ours, flash, cudnn, four rounds each (ms)
        128: ([0.30, 0.31, 0.29, 0.30], [0.40, 0.41, 0.39, 0.40], [0.35, 0.36, 0.34, 0.35]),
        1024: ([0.60, 0.61, 0.62, 0.60], [0.40, 0.41, 0.40, 0.42], [0.45, 0.44, 0.46, 0.45]),
        4096: ([0.50, 0.30, 0.70, 0.40], [0.36, 0.35, 0.34, 0.37], [0.50, 0.52, 0.51, 0.50]),
    }
    rows = []
    for seq, times in rounds.items():
        for impl, ms in zip(("ours_triton", "sdpa_flash", "sdpa_cudnn"), times):
            for pass_ in ("forward", "forward_backward"):
                rows.append(
                    sweep_row(impl, pass_, seq, median_ms=float(pd.Series(ms).median()), tflops=50.0, peak_mem_gib=0.01,
                              round_ms=";".join(f"{t:.4f}" for t in ms), rounds=len(ms), launched_within=bound)
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_sweep_states_the_launched_target_from_paired_rounds():
    """Per length, ours over the faster SDPA backend (the lower launched median), paired round by
    round: within the rows' bound where the CI's top is, above it where its bottom is, else not
    resolved; the count and the table are the rows'. Sweeps without rounds state no target."""
    from lmperf.measure.stats import ratio_ci, split_ms

    frame = rounds_frame()
    text = flash_section.render(leaderboard_frame(), frame)
    assert (
        "paired over 4 interleaved rounds: within 1.25× at 1 of 3 lengths, above it at 1, not resolved at 1"
    ) in text
    found = flash_section.launched_against_sdpa(frame).set_index("seq")
    assert found["faster"].to_dict() == {128: "sdpa_cudnn", 1024: "sdpa_flash", 4096: "sdpa_flash"}
    assert found["within"].to_dict() == {128: "yes", 1024: "no", 4096: "not resolved"}
    for seq, row in found.iterrows():
        rows = frame[(frame["seq"] == seq) & (frame["pass"] == "forward_backward")].set_index("implementation")
        ratio, low, high = ratio_ci(
            split_ms(rows.loc["ours_triton", "round_ms"]), split_ms(rows.loc[row.faster, "round_ms"])
        )
        assert f"| {seq} " in text and f"{ratio:.3f} [{low:.3f}, {high:.3f}]" in text
    assert "within 2.00× at 2 of 3 lengths" in flash_section.render(leaderboard_frame(), rounds_frame(2.0))
    assert "ours against the faster SDPA backend" not in flash_section.render(leaderboard_frame(), sweep_frame())


def test_the_launched_target_skips_rows_without_rounds_or_with_one():
    """Rows of an older sweep beside newer ones (their rounds columns empty) state no target and do not
    break the newer ones'; a length where ours was timed in one round pairs nothing and is left out."""
    old = rounds_frame().assign(d=128, round_ms=float("nan"), rounds=float("nan"), launched_within=float("nan"))
    text = flash_section.render(leaderboard_frame(), pd.concat([rounds_frame(), old]))
    assert text.count("ours against the faster SDPA backend") == 1 and "at 1 of 3 lengths" in text
    one = rounds_frame()
    one.loc[(one["implementation"] == "ours_triton") & (one["seq"] == 128), ["rounds", "round_ms"]] = [1, "0.3000"]
    assert flash_section.launched_against_sdpa(one)["seq"].tolist() == [1024, 4096]


def test_sweep_names_where_timings_are_host_bound():
    times = {"ours_triton": [0.5, 0.6, 0.7, 3.0], "sdpa_flash": [1.0, 1.1, 5.0, 20.0], "naive": [1.0, 9.0, 20.0, 40.0]}
    group = pd.DataFrame(
        [
            {"implementation": impl, "seq": seq, "median_ms": ms}
            for impl, series in times.items()
            for seq, ms in zip((128, 256, 512, 1024), series)
        ]
    )
    # sdpa_flash leaves its floor after 256, ours after 512; naive (not a fused kernel) is not asked
    assert flash_section.host_bound_up_to(group) == 256
    # a time that dips back under the bound after leaving it does not extend the flat region
    group.loc[(group["implementation"] == "sdpa_flash") & (group["seq"] == 1024), "median_ms"] = 1.5
    assert flash_section.host_bound_up_to(group) == 256


def test_no_host_bound_sentence_when_a_fused_kernel_grows_from_the_shortest_length():
    frame = sweep_frame()
    assert "Up to seq 2048 each fused kernel (ours_triton)" in flash_section.render(leaderboard_frame(), frame)
    frame.loc[(frame["implementation"] == "ours_triton") & (frame["seq"] == 2048), "median_ms"] = 5.0
    assert "Up to seq" not in flash_section.render(leaderboard_frame(), frame)


def test_no_host_bound_sentence_without_a_fused_kernel():
    group = pd.DataFrame({"implementation": ["naive", "naive"], "seq": [128, 256], "median_ms": [1.0, 1.1]})
    assert flash_section.host_bound_up_to(group) is None


def test_sweep_states_memory_growth_per_head_size():
    frame = pd.concat([sweep_frame(), sweep_frame().assign(d=128, peak_mem_gib=lambda f: f["peak_mem_gib"] * 3)])
    text = flash_section.render(leaderboard_frame(), frame)
    assert text.count("×2.00 for ×2.00 the sequence") == 2  # one per (dtype, d) table, not across them


def test_flash_figure_from_measured_and_from_skipped_rows(tmp_path):
    flash_figures.tflops_vs_seq(sweep_frame(), tmp_path / "measured.png")
    skipped = pd.DataFrame([{"study": "flash_sweep", "status": "skipped", "note": "needs a CUDA GPU", **ENV}])
    flash_figures.tflops_vs_seq(skipped, tmp_path / "skipped.png")
    for name in ("measured.png", "skipped.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def _attention_rows():
    """Interleaved graphed samples: flash_triton 2x faster in bf16 (resolved), as fast in fp32 (not
    resolved); naive out of memory at bf16, context 1024."""
    rows = []
    for attention in ("naive", "flash_triton"):
        for precision in ("bf16", "fp32"):
            for context in (128, 1024):
                oom = attention == "naive" and precision == "bf16" and context == 1024
                base = {"bf16": 20.0, "fp32": 30.0}[precision]
                if attention == "flash_triton":
                    samples = [base / 2] * 10 if precision == "bf16" else [base * f for f in (0.9, 1.1) * 5]
                else:
                    samples = [base] * 10 if precision == "bf16" else [base * f for f in (1.1, 0.9) * 5]
                ms = sorted(samples)[5]
                rows.append(
                    {
                        "attention": attention,
                        "size": "small",
                        "params": 1e8,
                        "context_length": context,
                        "precision": precision,
                        "compile": "compiled",
                        "mode": "train_step",
                        "status": "oom" if oom else "ok",
                        "graphed_median_ms": float("nan") if oom else ms,
                        "median_ms": float("nan") if oom else ms,
                        "mfu": 0.1,
                        "commit": "abc1234",
                        "graphed_step_times_ms": "" if oom else ";".join(map(str, samples)),
                    }
                )
    return pd.DataFrame(rows)


def test_attention_in_the_model_reports_ratios_with_their_ci_per_regime():
    from lmperf.report import e2e_section

    text = "\n".join(e2e_section._attention_section(_attention_rows()))
    assert "flash_triton bf16 compiled: median 2.00× (1 faster, 0 slower, 0 not resolved of 1)" in text
    assert "flash_triton fp32 compiled: median 1.00× (0 faster, 0 slower, 2 not resolved of 2)" in text
    assert re.search(
        r"\| small\s+\| 128\s+\| bf16\s+\| compiled\s+\| flash_triton\s+\| 20\.00\s+\| 10\.00\s+\| "
        r"2\.00× \(2\.000–2\.000\)\s+\| yes",
        text,
    )
    assert "| 1024      | bf16" not in text  # naive ran out of memory there: no ratio


def test_e2e_figures_draw_only_the_handout_model(tmp_path, monkeypatch):
    """The step-time figures are of the naive-attention model; flash rows would put two points per
    size on each line."""
    from lmperf.report import e2e_figures

    _attention_rows().to_csv(tmp_path / "e2e.csv", index=False)
    pd.DataFrame([{"size": "small", "mode": "forward", "warmup_steps": 0, "cv": 0.1, "status": "ok"}]).to_csv(
        tmp_path / "warmup.csv", index=False
    )
    drawn = {}
    for name in ("time_vs_size", "ratio_vs_size", "bf16_speedup", "host_overhead"):
        monkeypatch.setattr(e2e_figures, name, lambda e2e, path, name=name: drawn.update({name: e2e}))
    monkeypatch.setattr(e2e_figures, "warmup_spread", lambda warmup, path: None)
    e2e_figures.main(
        ["--e2e", str(tmp_path / "e2e.csv"), "--warmup", str(tmp_path / "warmup.csv"), "--outdir", str(tmp_path)]
    )
    assert set(drawn) == {"time_vs_size", "ratio_vs_size", "bf16_speedup", "host_overhead"}
    for frame in drawn.values():
        assert set(frame["attention"]) == {"naive"} and len(frame) == 4


def test_the_header_names_one_commit_or_says_there_are_several():
    from lmperf.report.render import provenance

    jobs = pd.DataFrame({"study": ["e2e", "ddp"], "job": ["a", "b"], "wall_s": [120.0, 60.0], "gpus": [1, 2]})
    h100 = pd.DataFrame({"commit": ["abc", "abc"], "device_name": ["NVIDIA H100 80GB HBM3"] * 2})
    h200 = pd.DataFrame({"commit": ["abc"], "device_name": ["NVIDIA H200"]})
    one = provenance([h100, h200, jobs], jobs)
    assert one.startswith("Every row comes from commit `abc`, measured on NVIDIA H100 80GB HBM3, NVIDIA H200.")
    assert "2 measuring jobs took 3.00 minutes of wall time and 4.00 GPU-minutes" in one
    two = provenance([h100, h200.assign(commit="def")], jobs)
    assert two.startswith("The rows come from 2 commits (`abc`, `def`), so not from one run")


def test_the_header_gives_gpu_minutes_per_study_and_the_runs_wall_time():
    from lmperf.report.render import provenance

    jobs = pd.DataFrame(
        {
            "study": ["e2e", "ddp", "e2e"],
            "job": ["a", "b", "c"],
            "wall_s": [120.0, 60.0, 30.0],
            "gpus": [1, 2, 1],
            "start_epoch": [100.0, 100.0, 160.0],  # c starts on a's heels: the run ends at 220 s
            "gpu_ids": ["0", "1,2", "0"],
            "host": ["h", "h", "h"],
        }
    )
    text = provenance([jobs], jobs)
    assert "4.50 GPU-minutes: e2e 2.50, ddp 2.00 (more in Cost of this run)" in text
    assert text.endswith("From the first job's start to the last one's end the run took 2.00 minutes on 3 GPUs.")
    # cost files from before the split: no start times, so no wall time is claimed
    assert "From the first job's start" not in provenance([jobs], jobs.drop(columns=["start_epoch", "gpu_ids", "host"]))


def test_leaderboard_rounds_pair_the_implementations_and_say_not_resolved():
    """With interleaved rounds, ours against another is a paired ratio with a CI: a difference inside
    the CI is "not resolved" (never a win), one outside it is stated with its direction."""
    rounds = {  # ms per round; cuDNN's forward is level with ours within the noise, flash clearly slower
        ("ours_triton", "forward"): [2.00, 2.03, 1.98, 2.01, 1.99, 2.02],
        ("sdpa_cudnn", "forward"): [2.01, 2.00, 2.00, 2.02, 1.98, 2.01],
        ("sdpa_flash", "forward"): [2.50, 2.52, 2.49, 2.51, 2.50, 2.53],
    }
    frame = leaderboard_frame()
    frame["round_ms"], frame["rounds"] = None, 6
    for (impl, pass_), times in rounds.items():
        at = (frame["implementation"] == impl) & (frame["pass"] == pass_)
        frame.loc[at, "round_ms"] = ";".join(map(str, times))
        frame.loc[at, "median_ms"] = sorted(times)[2] / 2 + sorted(times)[3] / 2
    frame["ci95_low_ms"], frame["ci95_high_ms"] = frame["median_ms"] * 0.99, frame["median_ms"] * 1.01
    text = flash_section.render(frame, sweep_frame())
    assert "shared by 6 rounds in which the implementations that ran take turns" in text
    assert "95% CI (ms)" in text
    cudnn = re.search(r"Forward, launched: .* the speed of sdpa_cudnn .*", text).group(0)
    assert "over 6 paired rounds) — not resolved." in cudnn
    flash = re.search(r"Forward, launched: .* the speed of sdpa_flash .*", text).group(0)
    assert "— ours faster." in flash
    assert "Forward + backward, launched: ours takes 5.000 ms, 0.90× the speed of sdpa_cudnn" in text  # no rounds


def test_leaderboard_says_which_anchor_did_not_run_and_why():
    skipped = {"implementation": "fa4", "status": "skipped", "note": "flash-attn-4 is not installed", **ENV}
    frame = pd.concat(
        [leaderboard_frame(), pd.DataFrame([{**skipped, "pass": p} for p in ("forward", "forward_backward")])]
    )
    text = flash_section.render(frame, sweep_frame())
    assert text.count("fa4 did not run: flash-attn-4 is not installed.") == 1
    assert "the speed of fa4" not in text


def test_sweep_numbers_come_from_analysis_functions_apart_from_the_words():
    frame = sweep_frame()
    ran = frame[frame["status"] == "ok"]
    ours = ran[(ran["implementation"] == "ours_triton") & (ran["pass"] == "forward_backward")].sort_values("seq")
    growth = flash_section.memory_growth(ours)
    assert (growth["before_seq"], growth["last_seq"]) == (1024, 2048)
    assert growth["growth"] == pytest.approx(2.0) and growth["shape"] == "at most linear"
    longest = flash_section.at_longest_sequence(ran)
    assert longest["seq"] == 2048 and longest["column"] == "median_ms"
    assert [(p["best"], p["best_ms"] / p["ms"]) for p in longest["passes"]] == [("naive", 2.0)] * 3
    ratio = flash_section.ours_against(leaderboard_frame(), "forward_backward", "sdpa_cudnn")
    assert ratio == {"ours_ms": 5.0, "theirs_ms": 4.5, "ratio": 0.9}  # no rounds: the bare ratio


def test_the_accumulation_experiment_is_stated_as_its_rows_ran_it():
    """How many additions of which value come from the rows, in the heading, the table and the
    sentence, beside the numbers accumulation_findings returns."""
    from lmperf.report import precision_section

    rows = pd.DataFrame(
        [
            {
                "accumulator": acc,
                "summand": summand,
                "summand_cast_to_accumulator": False,
                "summand_stored": stored,
                "summand_value": 0.02,
                "result": result,
                "abs_error": abs(result - 10),
                "n_adds": 500,
            }
            for acc, summand, stored, result in (
                ("float32", "float32", 0.0199999996, 10.0001),
                ("float16", "float16", 0.0200042725, 9.95),
                ("float32", "float16", 0.0200042725, 10.002),
            )
        ]
    )
    found = precision_section.accumulation_findings(rows)
    assert found["n"] == 500 and found["value"] == 0.02
    assert found["representation_error"] == pytest.approx(500 * (0.0200042725 - 0.02))
    text = "\n".join(precision_section.accumulation_lines(rows))
    assert "### Accumulation (500 additions of 0.02)" in text and "| 0.02 as stored" in text
    assert "sum of 500" in text and "500 × the float16 representation error of 0.02" in text
    assert "of 1000" not in text and "of 0.01" not in text


def test_the_summary_states_the_fastest_fp32_bucketed_ddp_variant_at_the_largest_batch():
    """The summary's data-parallel numbers: at the largest global batch, the fastest bucketed variant
    that ran with fp32 on the wire (not a faster bf16 one, a failed one, or one at a smaller batch),
    with its ratio to torch DDP and that ratio's CI; none where no such variant ran."""
    from lmperf.report import summary

    rows = pd.DataFrame(
        [
            {
                "variant": variant,
                "global_batch": batch,
                "median_ms": ms,
                "vs_anchor": ms / 10.0,
                "vs_anchor_ci95_low": ms / 10.0 - 0.05,
                "vs_anchor_ci95_high": ms / 10.0 + 0.05,
                "status": status,
                "world_size": 2,
                "backend": "nccl",
            }
            for variant, batch, ms, status in (
                ("torch_ddp", 16, 10.0, "ok"),
                ("bucketed-1000", 16, 9.5, "ok"),
                ("bucketed-1", 16, 9.0, "ok"),
                ("bucketed-1-bf16", 16, 7.0, "ok"),
                ("bucketed-10", 16, 1.0, "oom"),
                ("bucketed-1", 8, 4.0, "ok"),
            )
        ]
    )
    found = summary.ddp_finding(rows)
    assert found["variant"] == "bucketed-1" and found["global_batch"] == 16
    assert found["world_size"] == 2 and found["backend"] == "nccl"
    assert (found["vs_anchor"], found["low"], found["high"]) == pytest.approx((0.9, 0.85, 0.95))
    assert summary.ddp_finding(rows[~rows["variant"].isin(["bucketed-1", "bucketed-1000"])]) is None


def test_the_flash_section_states_the_published_anchor_from_its_file(tmp_path):
    """FlashAttention-3's figures come from the file the section names, marked as not measured here,
    beside ours; where the leaderboard did not run (a CPU), the section says nothing of them."""
    paper = tmp_path / "anchor.csv"
    paper.write_text(
        "implementation,source,device,dtype,tokens,hidden,d,causal,pass,tflops\n"
        "FA-X,a paper,GPU-Y,fp16,16384,2048,64,True,forward,473\n"
        "FA-X,a paper,GPU-Y,fp16,16384,2048,128,False,backward,561\n"
    )
    ran = pd.DataFrame(
        {"implementation": ["ours_triton", "ours_triton"], "pass": ["forward", "forward_backward"], "d": [64, 64]}
    ).assign(tflops=[378.75, 360.9], status="ok")
    (line, _) = flash_section.published_anchor(ran, paper)
    assert line.startswith("Published, not measured here: FA-X (a paper) on an GPU-Y, fp16, 16384 tokens")
    assert "causal forward at d 64: 473 TF/s; non-causal backward at d 128: 561 TF/s." in line
    assert line.endswith("Ours at the leaderboard shape, causal forward at d 64: 379 TF/s (the table above).")
    assert flash_section.published_anchor(ran.assign(status="skipped"), paper) == []
    assert flash_section.PUBLISHED.exists()


def test_the_e2e_method_names_a_precision_that_ran_eager_alone():
    from lmperf.report.e2e_section import eager_alone

    rows = pd.DataFrame({"precision": ["fp32", "bf16", "bf16"], "compile": ["eager", "eager", "compiled"]})
    assert eager_alone(rows).startswith(" fp32 ran eager alone in this run (the grid's `e2e.compile_precisions`")
    assert eager_alone(rows).endswith("so torch.compile's speed-up is measured in bf16 alone.")
    assert eager_alone(rows[rows["precision"] == "bf16"]) == ""  # one precision: nothing to say
    both = pd.concat([rows, rows.assign(precision="fp32", compile="compiled").iloc[:1]])
    assert eager_alone(both) == ""  # every precision compiled


def test_the_e2e_method_names_each_sizes_learning_rate_from_its_rows():
    """The smoke run's e2e rows, as the report renders them, with the rate recorded: the method
    paragraph names it by size; rows that do not record one name none."""
    from lmperf.report import e2e_section, render

    rows = render.read(ROOT / "tests/data/smoke-cpu/e2e.csv")
    warmup = render.read(ROOT / "tests/data/smoke-cpu/warmup.csv")
    rates = {"tiny": 5e-4, "nano": 1e-3}  # the smoke grid's sizes: nano is the smaller
    assert set(rows["size"]) == set(rates)
    text = e2e_section.render(rows.assign(lr=rows["size"].map(rates)), warmup)
    assert (
        "AdamW at learning rate 0.001 at nano, 0.0005 at tiny (chosen so that train steps repeated on one batch "
        "keep the weights finite), fp32 matmul precision"
    ) in text
    assert "learning rate" not in e2e_section.render(rows, warmup)
    two = pd.DataFrame({"size": ["2.7B", "small", "small"], "lr": [1.25e-05, 4.1667e-05, 4.1667e-05]})
    assert e2e_section.learning_rates(two).startswith(" at learning rate 4.17e-05 at small, 1.25e-05 at 2.7B (")


def test_replays_taken_in_turns_are_compared_unpaired():
    """Replay i of one variant stands beside replay i of the other only where the replays were
    interleaved step by step; replays timed in turns of blocks (``graphed_turns``) are resampled apart.
    Two variants with the same times step for step: paired, the ratio's CI is exactly 1; unpaired, it
    is as wide as the spread of either."""
    from lmperf.report.e2e_analysis import attention_ratios

    times = ";".join(str(20.0 + i) for i in range(10))
    point = {"size": "small", "params": 1e8, "context_length": 128, "precision": "bf16", "compile": "compiled"}
    rows = pd.DataFrame(
        [
            {
                **point,
                "attention": a,
                "mode": "train_step",
                "status": "ok",
                "graphed_median_ms": 24.5,
                "graphed_step_times_ms": times,
            }  # fmt: skip
            for a in ("naive", "flash_triton")
        ]
    )
    (paired,) = attention_ratios(rows).itertuples()
    assert paired.ci95_low == paired.ci95_high == 1.0
    (apart,) = attention_ratios(rows.assign(graphed_turns=2)).itertuples()
    assert apart.ci95_low < 0.9 and apart.ci95_high > 1.1 and not apart.resolved


def test_the_e2e_method_says_how_the_replays_took_turns():
    from lmperf.report.e2e_section import replay_turns

    rows = pd.DataFrame(
        [{"status": "ok", "graphed_median_ms": 1.0, "graphed_turns": 2, "settle_seconds": 2.0, "attention": "naive"}]
    )
    sentence = replay_turns(rows)
    assert "take 2 turns in blocks" in sentence and "at most 2.0 s" in sentence
    assert replay_turns(rows.drop(columns="graphed_turns")) == ""  # older rows: their report said nothing of it


def test_the_warmup_intro_says_whether_each_setting_had_processes_of_its_own():
    """Rows from processes that timed every warm-up setting (``warmup_windows``) are described so;
    older rows, one process per setting, as they were made."""
    from lmperf.report.e2e_section import warmup_intro

    rows = pd.DataFrame({"warmup_steps": [0, 5], "commit": "abc", "device_type": "cuda"})
    assert warmup_intro(rows).startswith("Each setting runs in several fresh processes, so zero warm-up steps means")
    windowed = warmup_intro(rows.assign(warmup_windows="0;5"))
    assert windowed.startswith("Several fresh processes each time every step from their first.")
    assert "rows come from the same processes. Zero warm-up steps means the measured steps include CUDA" in windowed


def test_e2e_states_its_hold_rule_from_the_rows_with_the_probe_where_they_carry_it():
    from lmperf.report.e2e_section import replay_turns

    rows = pd.DataFrame({"status": "ok", "graphed_median_ms": [1.0], "graphed_turns": [2], "settle_seconds": [2.0]})
    assert "held first until its time per step stops moving (at most 2.0 s), then timed" in replay_turns(rows)
    probed = replay_turns(rows.assign(settle_far_below=0.75))
    assert (
        "stops moving (at most 2.0 s), or sooner where its instantaneous power stays below 75% of the limit at the "
        "top SM clock, then timed" in probed  # rows from before blocks were timed again say nothing of it
    )
    counted = replay_turns(rows.assign(settle_far_below=0.75, graphed_turn_retimed="0;1"))
    assert "held again and timed again: 1 of 2 blocks here), then timed" in counted  # from the rows' flags


def test_what_the_first_steps_cost_reads_every_step_of_a_process_that_timed_every_count():
    """Windowed rows: the largest count's row holds the process's steps from the first (warm-up, then
    timed), so a short smoke grid still shows the first steps; older rows: the no-warm-up processes'."""
    from lmperf.report.e2e_analysis import warmup_steps_cost

    steps = ["9;3;2", "1;1;1;1;1"]  # a process's first three steps, then five timed
    rows = pd.DataFrame(
        {
            "size": "nano",
            "mode": "forward",
            "status": "ok",
            "warmup_steps": [0, 3],
            "warmup_times_ms": [None, steps[0]],
            "step_times_ms": ["9;3;2;1;1", steps[1]],
            "warmup_windows": "0;3",
        }
    )
    cost = warmup_steps_cost(rows, first_steps=2)
    assert cost["median_ratio"].tolist() == [9.0, 3.0] and cost["processes"].tolist() == [1, 1]
    older = warmup_steps_cost(rows.drop(columns="warmup_windows"), first_steps=2)  # the count-0 row: 5 steps
    assert older["median_ratio"].tolist() == [9.0, 3.0]
    assert warmup_steps_cost(rows.drop(columns="warmup_windows"), first_steps=5).empty  # too few steps alone
