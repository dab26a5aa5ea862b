"""Where a job's time goes (lmperf.measure.phases): phases count apart, and the split sums to the job's time."""

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


def test_an_unknown_phase_is_refused_with_its_name():
    with pytest.raises(ValueError, match="compiling"):
        with phases.phase("compiling"):
            pass


def test_write_rows_leaves_the_split_beside_a_main_output_only(tmp_path, monkeypatch):
    monkeypatch.setenv("LMPERF_JOB_START", str(time.time()))
    monkeypatch.delenv("RANK", raising=False)
    write_rows([{"status": "ok", "x": 1}], tmp_path / "main.csv")
    write_rows([{"status": "ok", "x": 1}], tmp_path / "main-kernels.csv", cost=False)
    split = pd.read_csv(tmp_path / "main.cost.csv")
    assert list(split["phase"]) == list(phases.PHASES) and split.loc[split.phase == "write", "seconds"].item() > 0
    assert not (tmp_path / "main-kernels.cost.csv").exists()


def test_only_rank_0_writes_the_split(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    write_rows([{"status": "ok"}], tmp_path / "rank1.csv")
    assert (tmp_path / "rank1.csv").exists() and not (tmp_path / "rank1.cost.csv").exists()
