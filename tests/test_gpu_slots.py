"""Every GPU of the machine, one job each: lmperf.gpu_slots with fake GPUs (CUDA_VISIBLE_DEVICES on a CPU)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, copy_pipeline, snakemake

# A job that records the GPUs it was given and when it ran, then holds them for a while.
RECORD = (
    "import os, sys, time; start = time.time(); time.sleep(float(sys.argv[2]));"
    " open(sys.argv[1], 'w').write(f\"{os.environ['CUDA_VISIBLE_DEVICES']} {start} {time.time()}\")"
)


def slots_env(tmp_path: Path, gpus: str) -> dict:
    return {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": gpus,
        "LMPERF_GPU_SLOTS_DIR": str(tmp_path / "slots"),
        "PYTHONPATH": str(ROOT / "src"),
    }


def start(tmp_path: Path, gpus: str, count: int, name: str, seconds: float) -> subprocess.Popen:
    command = [sys.executable, "-m", "lmperf.gpu_slots", str(count), "--"]
    command += [sys.executable, "-c", RECORD, str(tmp_path / name), str(seconds)]
    return subprocess.Popen(command, env=slots_env(tmp_path, gpus), stderr=subprocess.DEVNULL)


def records(tmp_path: Path, names) -> list[tuple[set[str], float, float]]:
    out = []
    for name in names:
        gpus, begin, end = (tmp_path / name).read_text().split()
        out.append((set(gpus.split(",")), float(begin), float(end)))
    return out


def assert_no_gpu_shared_at_once(runs):
    for i, (gpus_a, begin_a, end_a) in enumerate(runs):
        for gpus_b, begin_b, end_b in runs[i + 1 :]:
            if begin_a < end_b and begin_b < end_a:  # they ran at the same time
                assert not gpus_a & gpus_b, f"GPUs {gpus_a & gpus_b} shared by two jobs at once"


def test_parallel_jobs_never_share_a_gpu(tmp_path):
    jobs = [start(tmp_path, "0,1,2", 1, f"job{i}", 0.6) for i in range(7)]
    assert all(job.wait(timeout=60) == 0 for job in jobs)
    runs = records(tmp_path, [f"job{i}" for i in range(7)])
    assert all(len(gpus) == 1 and gpus <= {"0", "1", "2"} for gpus, _, _ in runs)
    assert_no_gpu_shared_at_once(runs)
    assert len(set().union(*(gpus for gpus, _, _ in runs))) == 3  # every GPU was used


def test_a_multi_rank_job_gets_distinct_gpus_and_waits_for_them(tmp_path):
    jobs = [start(tmp_path, "4,5,6", 2, f"job{i}", 0.6) for i in range(3)]
    assert all(job.wait(timeout=60) == 0 for job in jobs)
    runs = records(tmp_path, [f"job{i}" for i in range(3)])
    assert all(len(gpus) == 2 and gpus <= {"4", "5", "6"} for gpus, _, _ in runs)
    assert_no_gpu_shared_at_once(runs)  # with 3 GPUs, two jobs of 2 never ran at once


def test_a_killed_job_frees_its_gpu(tmp_path):
    holder = start(tmp_path, "0", 1, "holder", 300)
    time.sleep(1.0)  # it holds the only GPU now
    waiter = start(tmp_path, "0", 1, "waiter", 0)
    with pytest.raises(subprocess.TimeoutExpired):
        waiter.wait(timeout=1.5)  # the GPU is taken
    holder.send_signal(signal.SIGKILL)
    assert waiter.wait(timeout=10) == 0
    assert records(tmp_path, ["waiter"])[0][0] == {"0"}


def test_no_gpu_jobs_see_none_and_cpu_machines_run_as_they_are(tmp_path):
    def visible(gpus: str, count: int) -> subprocess.CompletedProcess:
        show = [sys.executable, "-c", "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))"]
        command = [sys.executable, "-m", "lmperf.gpu_slots", str(count), "--", *show]
        return subprocess.run(command, env=slots_env(tmp_path, gpus), capture_output=True, text=True, check=True)

    assert visible("0,1", 0).stdout.strip() == ""  # a job of 0 GPUs (gloo's CPU ranks) sees no GPU
    cpu = visible("", 1)
    assert cpu.stdout.strip() == "" and "gpu_slots" not in cpu.stderr  # no GPU: nothing assigned


@pytest.mark.slow
def test_the_pipeline_runs_one_gpu_jobs_side_by_side_on_gpus_of_their_own(tmp_path):
    """The smoke grid's warm-up jobs with four fake GPUs: `device` counts them, every measuring job goes
    through gpu_slots holding the GPUs it needs, and jobs that ran at once ran on different GPUs."""
    (tmp_path / "run").mkdir()
    workdir = copy_pipeline(tmp_path / "run")
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "LMPERF_GPU_SLOTS_DIR": str(tmp_path / "slots")}
    # device=cpu: the fake GPUs hold slots, and the studies measure on this machine's CPU
    dry = snakemake(
        workdir, "-n", "-p", "--config", "grid=smoke", "device=cpu", "--", "report/final.md", env=env
    ).stdout
    for block in dry.split("\n\n"):
        if re.search(r"device=\d", block):  # a job's resources (the run's header names device=cpu)
            count = re.search(r"device=(\d+)", block).group(1)
            assert f"python -m lmperf.gpu_slots {count} -- " in block, block
    assert re.search(r"rule allreduce:.*?gloo.*?device=0", dry, re.S)  # gloo's CPU ranks hold no GPU

    snakemake(workdir, "--cores", "4", "--config", "grid=smoke", "device=cpu", "--", "results/warmup.csv", env=env)
    runs = []
    for log in (workdir / "logs" / "warmup").rglob("*.log"):
        gpus, begin = re.search(r"gpu_slots: CUDA_VISIBLE_DEVICES=(\S+) at (\S+)", log.read_text()).groups()
        runs.append(({gpus}, float(begin), log.stat().st_mtime))
    assert len(runs) == 4  # the smoke grid's 2 modes x 2 processes
    assert_no_gpu_shared_at_once(runs)
    assert len({gpu for gpus, _, _ in runs for gpu in gpus}) > 1  # side by side, not one GPU at a time
