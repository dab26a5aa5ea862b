"""Where a job's time goes (lmperf.measure.phases): phases count apart, and the split sums to the job's time."""

import logging
import re
import subprocess
import sys
import time

import pandas as pd
import pytest

from lmperf.measure import phases, write_rows


@pytest.fixture(autouse=True)
def fresh():
    phases.reset()
    yield
    phases.reset()


def test_nested_phases_count_apart_and_the_split_sums_to_the_time_since_the_job_started():
    job_start = time.time()
    time.sleep(0.05)  # process start and imports
    with phases.phase("build"):
        time.sleep(0.05)
    with phases.phase("timed"):
        time.sleep(0.05)
        with phases.phase("capture"):  # inside timed, counted as capture only
            time.sleep(0.1)
    time.sleep(0.05)  # between phases: other
    now = time.time()
    split = phases.split(now, env={"LMPERF_JOB_START": str(job_start)})
    assert list(split) == list(phases.PHASES)
    assert split["start"] == pytest.approx(0.05, abs=0.02)
    assert split["build"] == pytest.approx(0.05, abs=0.02)
    assert split["timed"] == pytest.approx(0.05, abs=0.02)
    assert split["capture"] == pytest.approx(0.1, abs=0.02)
    assert split["other"] == pytest.approx(0.05, abs=0.02)
    assert sum(split.values()) == pytest.approx(now - job_start, rel=1e-6)


def test_the_log_says_each_phase_as_the_job_enters_it(caplog):
    caplog.set_level(logging.INFO, logger="lmperf.measure.phases")
    for name in ("build", "warmup", "warmup", "timed"):  # warm-up entered again at once: no news
        with phases.phase(name):
            if name == "timed":
                with phases.phase("capture"):
                    pass
    assert caplog.messages == ["phase build", "phase warmup", "phase timed", "phase capture"]


def test_a_jobs_log_has_the_time_level_and_module_of_each_line(tmp_path):
    """A python -m entry point logs to stderr (lmperf.log), which a rule's log file takes."""
    out = tmp_path / "results" / "accumulation.csv"
    cmd = [sys.executable, "-m", "lmperf.studies.precision", "accumulation", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert re.search(r"^\S+ \S+ INFO lmperf\.measure\.phases: phase write$", proc.stderr, re.M), proc.stderr


def test_an_unknown_phase_is_refused_with_its_name():
    with pytest.raises(ValueError, match="compiling"):
        with phases.phase("compiling"):
            pass


def test_write_rows_leaves_the_split_beside_the_benchmark_of_a_main_output_only(tmp_path, monkeypatch):
    """results/ holds only declared outputs: the split goes to benchmarks/, where Snakemake's file is."""
    monkeypatch.setenv("LMPERF_JOB_START", str(time.time()))
    monkeypatch.delenv("RANK", raising=False)
    write_rows([{"status": "ok", "x": 1}], tmp_path / "results/e2e/main.csv")
    write_rows([{"status": "ok", "x": 1}], tmp_path / "results/e2e/main-kernels.csv", cost=False)
    write_rows([{"status": "ok", "x": 1}], tmp_path / "by-hand.csv")  # not a pipeline output: no split
    split = pd.read_csv(tmp_path / "benchmarks/e2e/main.cost.csv")
    assert list(split["phase"]) == list(phases.PHASES) and split.loc[split.phase == "write", "seconds"].item() > 0
    assert sorted(p.name for p in (tmp_path / "benchmarks/e2e").iterdir()) == ["main.cost.csv"]
    assert sorted(p.name for p in (tmp_path / "results/e2e").iterdir()) == ["main-kernels.csv", "main.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmarks", "by-hand.csv", "results"]


def test_only_rank_0_writes_the_split(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    write_rows([{"status": "ok"}], tmp_path / "results/rank1.csv")
    assert (tmp_path / "results/rank1.csv").exists() and not (tmp_path / "benchmarks").exists()


def test_the_cost_table_reads_each_jobs_split(tmp_path):
    """lmperf.report.cost joins each benchmark with the split its job wrote: the phases, the exit (the
    benchmark's wall time past the split), and the run's elapsed time and GPUs."""
    from lmperf.report import cost

    for name, wall_s, gpus, start in (("a", 10.0, "0", 1000.0), ("b", 20.0, "1", 1005.0)):
        (tmp_path / "benchmarks/e2e").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"benchmarks/e2e/{name}.tsv").write_text(f"s\th:m:s\n{wall_s}\t0:00:10\n")
        (tmp_path / "results/e2e").mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"status": ["ok"], "device_type": ["cuda"]}).to_csv(tmp_path / f"results/e2e/{name}.csv")
        split = {name: 0.0 for name in phases.PHASES} | {"start": 1.0, "timed": wall_s - 3.0, "other": 1.5}
        pd.DataFrame({"phase": list(split), "seconds": list(split.values())}).assign(
            job_start=start, gpus=gpus, host="node"
        ).to_csv(tmp_path / f"benchmarks/e2e/{name}.cost.csv", index=False)
    jobs = cost.collect([str(tmp_path / "benchmarks/e2e/a.tsv"), str(tmp_path / "benchmarks/e2e/b.tsv")], [1, 1])
    assert list(jobs["exit_s"]) == pytest.approx([0.5, 0.5]) and list(jobs["timed_s"]) == [7.0, 17.0]
    assert cost.elapsed(jobs) == (pytest.approx(25 / 60), ["node:0", "node:1"])  # 1000 s to 1025 s
    shown = cost.render(jobs)
    assert "From the first job's start to the last one's end the run took 0.42 minutes, on 2 GPUs" in shown
    split_rows = [line for line in shown.splitlines() if line.startswith("| e2e") and "%" in line]
    assert split_rows == ["| e2e     | 7%      | 80%     | 10%     | 3%     |"]  # start, timed, other, exit of 30 s
