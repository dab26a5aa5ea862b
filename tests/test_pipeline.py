"""The pipeline end to end on the smoke grid: report from CSVs, stale targets, profiles, recovery."""

import os
import platform
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import (
    clone_run,
    copy_pipeline,
    dry_run,
    dry_run_jobs,
    job_holder,
    markdown_tables,
    snakemake,
    table_problems,
)
from lmperf.registry import STUDIES, rule_resources
from lmperf.report import memory_figures
from lmperf.report.projection import target

pytestmark = pytest.mark.slow


def test_report_tables_are_the_csvs(smoke_run):
    report = (smoke_run / "report/final.md").read_text()
    e2e = pd.read_csv(smoke_run / "results/e2e.csv")
    checked = 0
    for precision, compile_ in e2e[["precision", "compile"]].drop_duplicates().itertuples(index=False):
        # no CUDA graphs on a CPU: the launched columns alone, one per mode
        for size, ctx, *cells in markdown_tables(report, f"**{precision}, {compile_}**"):
            assert len(cells) == 3
            for mode, launched in zip(("forward", "forward_backward", "train_step"), cells):
                row = e2e[
                    (e2e["attention"] == "naive")
                    & (e2e["size"] == size)
                    & (e2e["context_length"] == int(ctx))
                    & (e2e["precision"] == precision)
                    & (e2e["compile"] == compile_)
                    & (e2e["mode"] == mode)
                ].iloc[0]
                median, low, high = (float(x) for x in re.match(r"([\d.]+) \(([\d.]+)–([\d.]+)\)", launched).groups())
                assert median == pytest.approx(row["median_ms"], abs=0.005)
                assert low == pytest.approx(row["ci95_low_ms"], abs=0.005)
                assert high == pytest.approx(row["ci95_high_ms"], abs=0.005)
                assert "CUDA graphs need a CUDA device" in row["note"]  # why no graphed time
                checked += 1
    naive = e2e[e2e["attention"] == "naive"]
    # sizes x contexts x (fp32 eager, bf16 eager, bf16 compiled) x modes
    assert checked == len(naive) == 2 * 1 * 3 * 3
    assert "No step of this run was replayed as a CUDA graph" in report and "graphed (ms)" not in report

    accumulation = pd.read_csv(smoke_run / "results/precision/accumulation.csv")
    fp16 = accumulation[accumulation["accumulator"] == "float16"].iloc[0]
    assert f"{fp16['result']:.10f}" in report

    assert "did not run on" in report.split("## FlashAttention", 1)[1]  # GPU-only benchmarks, skipped on a CPU

    allreduce = pd.read_csv(smoke_run / "results/allreduce.csv").set_index(["world_size", "bytes"])
    swept = markdown_tables(report, "### All-reduce sweep")
    assert len(swept) == len(allreduce)
    for backend, ranks, size, median, *_ in swept:
        value, unit = size.split()
        nbytes = round(float(value) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit])
        assert backend == "gloo"
        assert float(median.split()[0]) == pytest.approx(allreduce.loc[(int(ranks), nbytes), "median_ms"], abs=0.00005)
        assert allreduce.loc[(int(ranks), nbytes), "iters"] >= 100
    fits = pd.read_csv(smoke_run / "results/comm_fit.csv")
    assert len(markdown_tables(report, "### Fit of time")) == len(fits) == 2

    sweep = pd.read_csv(smoke_run / "results/attention.csv").set_index(["compile", "d", "seq"])
    attention_rows = markdown_tables(report, "## Attention at scale")
    assert len(attention_rows) == len(sweep)
    for compile_, d, seq, forward, backward, *_ in attention_rows:
        row = sweep.loc[(compile_, int(d), int(seq))]
        assert float(forward) == pytest.approx(row["forward_mean_ms"], abs=0.0005)
        assert float(backward) == pytest.approx(row["backward_mean_ms"], abs=0.0005)

    ddp = pd.read_csv(smoke_run / "results/ddp_train.csv").set_index("variant")
    ddp_rows = markdown_tables(report, "### Global batch 4")
    assert sorted(r[0] for r in ddp_rows) == sorted(ddp.index) and (ddp["backend"] == "gloo").all()
    for variant, step, *_ in ddp_rows:
        assert float(step.split()[0]) == pytest.approx(ddp.loc[variant, "median_ms"], abs=0.005)
    assert "Not measured: memory accounting needs CUDA allocator stats" in report

    timing = pd.read_csv(smoke_run / "results/profile_timing.csv").set_index("mode")
    ((size, ctx, profiled, e2e_launched, *_),) = markdown_tables(report, "(a) The profiler's forward time against")
    assert float(profiled) == pytest.approx(timing.loc["forward", "profiler_forward_ms"], abs=0.005)
    # the smoke grid's e2e study times the profiled point, so the profiler is checked against it
    point = e2e[
        (e2e["attention"] == "naive")
        & (e2e["size"] == size)
        & (e2e["context_length"] == int(ctx))
        & (e2e["precision"] == "fp32")
        & (e2e["compile"] == "eager")
        & (e2e["mode"] == "forward")
    ]
    assert float(e2e_launched) == pytest.approx(point["median_ms"].iloc[0], abs=0.005)

    memory = pd.read_csv(smoke_run / "results/memory.csv").set_index(["mode", "precision", "context_length", "state"])
    shown = markdown_tables(report, "## Memory")
    assert len(shown) == len(memory) == 2 * 2 * 1 * 2  # modes x precisions x contexts x (first, steady)
    for mode, precision, ctx, step, peak, *_ in shown:
        state = step.split()[0]
        assert float(peak) == pytest.approx(memory.loc[(mode, precision, int(ctx), state), "trace_peak_mib"], abs=0.05)

    for image in re.findall(r"\]\((figures/[^)]+\.png)\)", report):
        assert (smoke_run / "report" / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_smoke_report_reads_right(smoke_run):
    """What a newcomer reads first: every table renders and fits a screen, no sentence about a GPU
    that did not run, ranges of one value and direction words that follow their numbers, the device
    named by its model, a summary first, and every cross-check run on the CPU."""
    report = (smoke_run / "report/final.md").read_text()
    assert table_problems(report) == []
    for gpu_only in ("GPU busy", "timed with CUDA events", "GPU-minutes", "few seconds", "graphed (ms)", "x86_64"):
        assert gpu_only not in report, gpu_only
    assert not re.search(r"(?<![\d.])(\d[\d.]*[%×]?)–\1(?![\d.])", report)  # "101%–101%"
    assert not re.search(r"\bby -[\d.]+(?![\d.]* to \+)", report) and "1 warm-up steps" not in report
    for line in (line for line in report.splitlines() if not line.startswith("|")):  # one time unit a paragraph
        assert not (re.search(r"\d µs", line) and re.search(r"\d ms\b", line)), line
    assert report.index("## Summary") < report.index("## End-to-end benchmarking")
    assert "(a) The profiler's forward time differs from the e2e study's" in report  # the profile check ran
    assert "Cross-check: the steady-state trace peak here against the e2e study's" in report  # and memory's
    summary = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    cost = pd.read_csv(smoke_run / "results/cost.csv")
    assert f"{len(cost)} measuring jobs, {cost['wall_s'].sum() / 60:.2f} minutes of wall time, no GPU time" in summary
    device = pd.read_csv(smoke_run / "results/e2e.csv")["device_name"].iloc[0]
    assert device != platform.machine() and f"Device **{device}** (CPU)" in report


def test_attentions_are_compared_only_in_the_grids_attention_precisions(smoke_run):
    """e2e.attention_precisions: bf16 targets time every attention of the grid, fp32 ones naive alone,
    and the report says why the fp32 rows compare none."""
    config = yaml.safe_load((smoke_run / "config.yaml").read_text())["grids"]["smoke"]["e2e"]
    e2e = pd.read_csv(smoke_run / "results/e2e.csv")
    timed = e2e.groupby("precision")["attention"].agg(set).to_dict()
    assert config["attention_precisions"] == ["bf16"]
    assert timed == {"bf16": set(config["attention"]), "fp32": {config["attention"][0]}}
    assert (
        "fp32 times naive attention alone (the grid's `e2e.attention_precisions`)"
        in (smoke_run / "report/final.md").read_text()
    )


def test_compiled_runs_only_in_the_grids_compile_precisions(smoke_run):
    """e2e.compile_precisions: bf16 runs eager and compiled, fp32 eager alone, and the report says so."""
    config = yaml.safe_load((smoke_run / "config.yaml").read_text())["grids"]["smoke"]["e2e"]
    e2e = pd.read_csv(smoke_run / "results/e2e.csv")
    assert config["compile_precisions"] == ["bf16"]
    assert e2e.groupby("precision")["compile"].agg(set).to_dict() == {"bf16": {"eager", "compiled"}, "fp32": {"eager"}}
    assert sorted(p.name for p in (smoke_run / "results/e2e/nano").glob("*.csv")) == [
        "bf16-compiled.csv",
        "bf16-eager.csv",
        "fp32-eager.csv",
    ]
    assert (
        "fp32 ran eager alone in this run (the grid's `e2e.compile_precisions`"
        in (smoke_run / "report/final.md").read_text()
    )


def test_smoke_figures_have_data_or_say_why_not(smoke_run):
    report = (smoke_run / "report/final.md").read_text()
    embedded = re.findall(r"\]\((figures/[^)]+\.png)\)", report)
    images = [(smoke_run / "report" / name).read_bytes() for name in embedded]
    assert len(set(images)) == len(images)  # no two embedded figures are one placeholder
    assert "*Kernel timeline of one training step, naive vs overlapped DDP: not drawn, " in report
    assert "figures/ddp_timeline.png" not in report  # an empty timeline is said, not embedded
    for timeline in (smoke_run / "results/memory").glob("*-timeline.csv"):
        live = pd.read_csv(timeline).drop(columns=list(memory_figures.KEYS))
        assert (live >= 0).all(axis=None), timeline.name  # live memory is never negative


def test_a_fresh_pipeline_has_nothing_to_do(smoke_run):
    proc = snakemake(smoke_run, "--cores", "1", "report/final.md", "--config", "grid=smoke")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert not quiet_failures(proc.stdout + proc.stderr)


def quiet_failures(output: str) -> list[str]:
    """Lines of a Snakemake run's output that name an exception or start a traceback."""
    return [line for line in output.splitlines() if "Exception" in line or "Traceback" in line]


def test_a_dry_run_prints_no_exception(tmp_path):
    proc = snakemake(copy_pipeline(tmp_path), "-n", "report/final.md", "--config", "grid=smoke")
    assert not quiet_failures(proc.stdout + proc.stderr)


def test_the_smoke_run_printed_no_exception(smoke_run):
    """Snakemake's own log of each run in the smoke run's directory, the full run first."""
    logs = sorted((smoke_run / ".snakemake/log").glob("*.snakemake.log"))
    assert logs
    for log in logs:
        assert not quiet_failures(log.read_text()), log.name


def test_full_grid_dag(tmp_path):
    jobs = dry_run(copy_pipeline(tmp_path), "--config", "grid=full")
    # e2e: 5 sizes x (fp32 eager, bf16 eager, bf16 compiled), each sweeping 4 contexts (3 attentions in bf16);
    # warm-up: 1 size x 2 modes x 5 processes, each timing the 4 settings; flash sweep: 2 dtypes x 4 head sizes
    # all-reduce: gloo and nccl x 2, 4, 6 ranks; attention sweep: 2 compile modes x 4 head sizes;
    # DDP: 2 and 4 ranks, each 1 global batch, sharding, timeline; memory: 2 precisions x 2 modes x 3 contexts;
    # profile: 5 sizes, each job profiling 4 contexts x 2 modes; ladder: 2 sizes x 2 contexts, timed then checked
    assert jobs == {
        "e2e": 15,
        "batch": 2,
        "batch_figures": 1,
        "ladder_timed": 4,
        "ladder": 4,
        "warmup": 10,
        "precision": 3,
        "flash_leaderboard": 1,
        "flash_sweep": 8,
        "allreduce": 6,
        "attention_sweep": 8,
        "ddp_train": 2,
        "ddp_sharding": 2,
        "ddp_timeline": 2,
        "memory": 12,
        "profile": 5,
        "aggregate": 15,
        "e2e_figures": 1,
        "ladder_figures": 1,
        "flash_figures": 1,
        "comm_figures": 1,
        "comm_fit": 1,
        "cost": 1,
        "attention_figures": 1,
        "ddp_figures": 1,
        "memory_figure": 12,
        "report": 1,
    }


def test_slurm_profiles_request_gpus_only_where_jobs_use_them(tmp_path):
    workdir = copy_pipeline(tmp_path)
    jobs = dry_run_jobs(workdir, "--workflow-profile", "profiles/slurm")
    assert sum(j["rule"] == "e2e" for j in jobs) == 15  # the profile selects the full grid
    declared = rule_resources()  # each measuring rule's requests, from the studies' declarations
    for job in jobs:
        resources = dict(r.split("=", 1) for r in job["resources"].split(", "))
        if job["benchmark"]:  # a job's target is its benchmark file's path under results/ (projection targets)
            assert target(job["benchmark"]) in job["output"].split(", "), job
        gloo = job["rule"] == "allreduce" and "/gloo-" in job["output"]
        ranks = re.search(r"--ranks (\d+)", job["shell"])
        if gloo or not (ranks or declared.get(job["rule"], {}).get("gpu")):
            assert resources.get("gpu", "0") == "0", job["rule"]  # CPU-only: reductions, figures, precision
        else:
            assert job["benchmark"], job["rule"]
            assert resources["gpu"] == (ranks.group(1) if ranks else "1"), job["rule"]
            assert resources["gpu_model"] == "h100" and resources["tasks"] == "1" and resources["tasks_per_gpu"] == "0"
            assert resources["runtime"] == str(declared[job["rule"]]["runtime"]), job["rule"]
    cpu_jobs = dry_run_jobs(workdir, "--workflow-profile", "profiles/slurm-cpu")
    assert cpu_jobs and not any("gpu" in j["resources"] for j in cpu_jobs)


def test_killed_run_leaves_nothing_half_written_and_recovers(tmp_path):
    workdir = copy_pipeline(tmp_path)
    target = "results/e2e/nano/bf16-eager.csv"  # bf16: the precision whose targets time both attentions
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["grids"]["smoke"]["e2e"].update(warmup_steps=10**9)  # warms up until killed
    (workdir / "slow.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            target,
            "--configfile",
            "slow.yaml",
            "--config",
            "grid=smoke",
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    log = workdir / "logs/e2e/nano/bf16-eager.log"
    deadline = time.time() + 120
    while not (log.exists() and "built nano" in log.read_text()) and time.time() < deadline:
        time.sleep(0.2)  # wait until the job has built its model and is measuring
    assert log.exists(), "the job never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    out_dir = workdir / "results/e2e/nano"
    assert not (workdir / target).exists()
    assert not out_dir.exists() or not any(out_dir.iterdir())  # not even a temporary file

    snakemake(workdir, "--unlock", "--cores", "1", target)  # Snakemake's own lock outlives a SIGKILL
    snakemake(workdir, "--cores", "1", "--rerun-incomplete", target, "--config", "grid=smoke")
    rows = pd.read_csv(workdir / target)
    assert len(rows) == 6 and set(rows["status"]) == {"ok"}  # 3 modes x the smoke grid's 2 attentions


def test_a_forced_rerun_cut_off_is_finished_by_the_recovery_command(smoke_run, tmp_path):
    """`--forcerun e2e` killed while an e2e job runs (held until killed, so the kill never races the job):
    the README's recovery command remeasures what was lost and remakes what cites it, so every e2e source
    file is there and the aggregate and the report are newer than all of them."""
    run = clone_run(smoke_run, tmp_path)
    held = tmp_path / "held"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **job_holder("results/e2e/*", held)}
    command = ["--cores", "1", "report/final.md", "--forcerun", "e2e", "--config", "grid=smoke"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", *command],
        cwd=run,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not any(held.iterdir()) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert any(held.iterdir()), "no e2e job started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    (started,) = [f.read_text().split() for f in held.iterdir()]
    killed = started[started.index("--out") + 1]
    assert not (run / killed).exists()  # Snakemake removed it before starting the job

    snakemake(run, "--unlock")  # the README's recovery command: the default target, which names every file
    snakemake(run, "--cores", "1", "--rerun-incomplete", "--config", "grid=smoke")
    sources = [
        run / j["output"] for j in dry_run_jobs(run, "--forceall", "--config", "grid=smoke") if j["rule"] == "e2e"
    ]
    assert sources and all(path.exists() for path in sources)
    newest = max(path.stat().st_mtime for path in sources)
    assert (run / "results/e2e.csv").stat().st_mtime >= newest
    assert (run / "report/final.md").stat().st_mtime >= newest
    assert dry_run(run, "--config", "grid=smoke") == {}


def test_a_split_target_is_its_contexts_measured_apart_and_joined(tmp_path):
    """e2e.split_by_context: one job per context (each benchmarked, so each must fit an allocation),
    joined into the target a whole job writes: the same points and columns. A rerun has nothing to do."""
    workdir = copy_pipeline(tmp_path)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    split, whole = "results/e2e/nano/bf16-eager.csv", "results/e2e/tiny/bf16-eager.csv"  # same attentions, columns
    config["grids"]["smoke"]["e2e"].update(context_lengths=[32, 64], split_by_context=["results/e2e/nano/bf16-eager*"])
    (workdir / "split.yaml").write_text(yaml.safe_dump(config))
    args = ("--configfile", "split.yaml", "--config", "grid=smoke")
    jobs = dry_run(workdir, *args)
    # 2 sizes x (fp32 eager, bf16 eager, bf16 compiled), nano bf16 eager split in two
    assert (jobs["e2e"], jobs["e2e_context"], jobs["e2e_join"]) == (5, 2, 1)

    snakemake(workdir, "--cores", "1", split, whole, *args)
    whole_rows, joined = pd.read_csv(workdir / whole), pd.read_csv(workdir / split)
    assert list(joined.columns) == list(whole_rows.columns) and set(joined["status"]) == {"ok"}
    points = ["context_length", "mode", "attention"]
    assert sorted(joined[points].itertuples(index=False)) == sorted(whole_rows[points].itertuples(index=False))
    for ctx in (32, 64):
        assert set(pd.read_csv(workdir / f"results/e2e/nano/bf16-eager/ctx{ctx}.csv")["context_length"]) == {ctx}
        assert (workdir / f"benchmarks/e2e/nano/bf16-eager/ctx{ctx}.tsv").exists()
    rerun = snakemake(workdir, "-n", "--cores", "1", split, whole, *args)
    assert "Nothing to be done" in rerun.stdout + rerun.stderr


def test_cost_table_is_the_benchmark_files(smoke_run):
    cost = pd.read_csv(smoke_run / "results/cost.csv")
    jobs = dry_run_jobs(smoke_run, "--forceall", "--config", "grid=smoke")
    measuring = {j["rule"] for j in jobs if j["benchmark"]}
    assert measuring == {j["rule"] for j in jobs if "device=" in j["resources"]}  # every rule that holds the device
    assert sorted(cost["job"]) == sorted(j["benchmark"] for j in jobs if j["benchmark"])
    report = (smoke_run / "report/final.md").read_text()
    rows = markdown_tables(report, "## Cost of this run")
    half_cent = 0.005 + 1e-9  # the table rounds to 2 decimals; a sum that lands on .xx5 may round either way
    for study, jobs, wall_min, _longest in rows:  # no GPU-minutes column: every job ran on the CPU
        mine = cost[cost["study"] == study]
        assert int(jobs) == len(mine)
        assert float(wall_min) == pytest.approx(mine["wall_s"].sum() / 60, abs=half_cent)
    assert sorted(r[0] for r in rows) == sorted(set(cost["study"]))
    # a CPU-only run held no GPU: every job's rows say cpu, and nothing counts GPU-minutes
    assert (cost["device_type"] == "cpu").all() and (cost["gpus"] == 0).all()
    assert "GPU-minutes" not in report and "no GPU time" in report


def test_snakemake_report_holds_every_figure_and_the_report(smoke_run, tmp_path):
    run = clone_run(smoke_run, tmp_path)
    snakemake(run, "--report", "report/lmperf.zip", "report/final.md", "--config", "grid=smoke")
    packed = {Path(name).name for name in zipfile.ZipFile(run / "report/lmperf.zip").namelist()}
    figures = {p.name for p in (run / "report/figures").rglob("*.png")}
    drawn_once = [name for study in STUDIES.values() for name, figure in study.figures.items() if not figure.files]
    assert len(figures) == len(drawn_once) + 4  # and the smoke grid's 4 memory timelines
    assert figures | {"final.md", "report.html"} <= packed


def test_every_measuring_job_says_where_its_time_went(smoke_run):
    """Each job's split (start, build, warm-up, ..., other) sums to its benchmark's wall time, less the
    processes' exit (the split ends at the job's last write): at most a few percent of a job, or a few
    seconds on the smoke grid's short jobs. A study's process skips Python's teardown (0.1-0.2 s here,
    where the teardown took 0.9-4.7 s on a loaded 2-core machine: notes/one-allocation.md, section 16);
    a torchrun job (all-reduce, DDP) also waits for its launcher, which exits as usual (about 2 s here).
    And the report shows the split per study."""
    cost = pd.read_csv(smoke_run / "results/cost.csv")
    assert cost["start_s"].notna().all(), cost.loc[cost["start_s"].isna(), "job"].tolist()  # every job wrote one
    split_s = cost[[c for c in cost if c.endswith("_s") and c not in ("wall_s", "exit_s")]].sum(axis=1)
    assert (split_s <= cost["wall_s"] + 0.05).all()  # the split cannot outlast the job
    ending_s = cost["study"].isin(["allreduce", "ddp"]).map({True: 5.0, False: 1.0})  # torchrun's launcher, or not
    assert (cost["wall_s"] - split_s <= 0.05 * cost["wall_s"] + ending_s).all(), cost.assign(split_s=split_s)
    assert (cost["timed_s"] > 0).sum() >= len(cost) // 2  # the phases are marked, not all "other"
    report = (smoke_run / "report/final.md").read_text()
    cost_section = report.split("## Cost of this run", 1)[1]
    assert "Where each study's job time went" in cost_section and "From the first job's start" in cost_section
