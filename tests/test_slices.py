"""scripts/run-slice: a grid run in time-limited slices, each on a fresh checkout, carries its state in
one tarball, and Snakemake alone decides what is left. A job cut off by the time limit leaves no
output and is rerun whole; a finished one is never rerun; the last slice ends with nothing to do.

A slice that must be cut holds its job until it is killed (tests/hold_jobs): the cut comes while the
job runs or before it starts, however loaded the machine, and never after it finished."""

import base64
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, copy_pipeline, job_holder, snakemake

pytestmark = pytest.mark.slow

FIRST, SECOND = "results/e2e/nano/bf16-eager.csv", "results/e2e/nano/fp32-eager.csv"
DONE, MORE = 0, 3  # the script's exit status: nothing left to do; another slice needed


def fresh_checkout(dest: Path) -> Path:
    """The pipeline and the script, every file newer than anything a slice made before (as a clone is)."""
    dest.mkdir()
    copy_pipeline(dest)
    now = time.time() + 2
    for path in dest.rglob("*"):
        os.utime(path, (now, now))
    return dest


def script(
    name: str, workdir: Path, state: Path, seconds: float, *args: str, hold: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """scripts/NAME STATE SECONDS on the smoke grid, with this interpreter's snakemake on the PATH, run
    from ``cwd`` (the checkout where not given); the job writing ``hold`` (if given) waits until the
    slice is cut."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if hold:
        env.update(job_holder(hold, workdir.parent / f"{workdir.name}-held"))
    cmd = [str(workdir / "scripts" / name), str(state), str(seconds), "--config", "grid=smoke", "--", *args]
    return subprocess.run(cmd, cwd=cwd or workdir, capture_output=True, text=True, timeout=900, env=env)


def run_slice(workdir: Path, state: Path, seconds: float, *targets: str, hold: str = "") -> subprocess.CompletedProcess:
    return script("run-slice", workdir, state, seconds, *targets, hold=hold)


def fill_slice(workdir: Path, state: Path, seconds: int, *pairs: str, cwd: Path | None = None):
    return script("fill-slice", workdir, state, seconds, *pairs, cwd=cwd)


def ran(proc: subprocess.CompletedProcess) -> list[str]:
    """Outputs of the jobs a slice started (Snakemake logs to stderr)."""
    return [line.split(": ", 1)[1] for line in proc.stderr.splitlines() if line.startswith("    output: ")]


@pytest.mark.parametrize("args", [[], ["state.tgz", "ten"]], ids=["no arguments", "SECONDS not a number"])
def test_usage_is_printed_for_a_usage_error(args):
    proc = subprocess.run([ROOT / "scripts/run-slice", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and "scripts/run-slice STATE SECONDS" in proc.stderr


def test_slices_on_fresh_checkouts_finish_the_grid_without_rerunning_anything(tmp_path):
    state = tmp_path / "not-made-yet" / "state.tgz"  # the first slice makes its directory

    first = run_slice(fresh_checkout(tmp_path / "a"), state, 600, FIRST)
    assert first.returncode == DONE, first.stdout[-3000:] + first.stderr[-3000:]
    assert ran(first) == [FIRST] and "Nothing to be done" in first.stdout
    made = tarred_mtime(state, FIRST)

    # A slice too short for the second job: it stops, keeps nothing of it, and says another is needed.
    cut = run_slice(fresh_checkout(tmp_path / "b"), state, 3, FIRST, SECOND, hold=SECOND)
    assert cut.returncode == MORE, cut.stdout[-3000:] + cut.stderr[-3000:]
    assert FIRST not in ran(cut)
    assert not (tmp_path / "b" / SECOND).exists()

    last = run_slice(fresh_checkout(tmp_path / "c"), state, 600, FIRST, SECOND)
    assert last.returncode == DONE, last.stdout[-3000:] + last.stderr[-3000:]
    assert ran(last) == [SECOND]
    assert tarred_mtime(state, FIRST) == made  # carried as it was made: never rerun, never touched
    assert "Nothing to be done" in snakemake(tmp_path / "c", "-n", "--config", "grid=smoke", "--", FIRST, SECOND).stdout


def test_a_slice_cut_before_snakemake_starts_asks_for_another(tmp_path):
    """A limit shorter than Snakemake's start-up: nothing ran, the state is written all the same, and
    another slice is due."""
    state = tmp_path / "state.tgz"
    cut = run_slice(fresh_checkout(tmp_path / "a"), state, 0.01, FIRST, hold=FIRST)
    assert cut.returncode == MORE, cut.stdout[-3000:] + cut.stderr[-3000:]
    with tarfile.open(state) as tar:
        assert {"results", ".snakemake/incomplete"} <= set(tar.getnames())
        assert not [m for m in tar.getmembers() if m.name.startswith("results/") and m.isfile()]


def test_an_output_beside_its_incomplete_marker_asks_for_another_slice(tmp_path):
    """A slice cut after its job wrote its output but before Snakemake cleared the job's incomplete
    marker: the output is not trusted; the next slice reruns its job."""
    made = tmp_path / "made"
    (made / FIRST).parent.mkdir(parents=True)
    (made / FIRST).write_text("written before the cut\n")
    incomplete = made / ".snakemake/incomplete"  # Snakemake's marker: the output's path, base64
    incomplete.mkdir(parents=True)
    (incomplete / base64.urlsafe_b64encode(FIRST.encode()).decode()).write_text('{"external_jobid": null}')
    state = tmp_path / "state.tgz"
    with tarfile.open(state, "w:gz") as tar:
        for path in ("results", ".snakemake/incomplete"):
            tar.add(made / path, arcname=path)

    cut = run_slice(fresh_checkout(tmp_path / "b"), state, 0.01, FIRST, hold=FIRST)
    assert cut.returncode == MORE, cut.stdout[-3000:] + cut.stderr[-3000:]
    assert "e2e" in cut.stdout  # the job the next slice runs


def tarred_mtime(state: Path, member: str) -> float:
    with tarfile.open(state) as tar:
        return tar.getmember(member).mtime


def test_a_filled_slice_starts_only_the_targets_whose_expected_cost_fits(tmp_path):
    """scripts/fill-slice leaves a target that would not finish for the next allocation instead of
    starting it (its work would be lost), says so, and asks for another slice; the next one runs it,
    its STATE given relative to where it is called from, outside the checkout."""
    state = tmp_path / "state.tgz"
    first = fill_slice(fresh_checkout(tmp_path / "a"), state, 600, f"{FIRST}:60", f"{SECOND}:100000")
    assert first.returncode == MORE, first.stdout[-3000:] + first.stderr[-3000:]
    assert ran(first) == [FIRST] and f"left for the next allocation: {SECOND}" in first.stdout

    last = fill_slice(fresh_checkout(tmp_path / "b"), Path("state.tgz"), 600, f"{FIRST},{SECOND}:60", cwd=tmp_path)
    assert last.returncode == DONE, last.stdout[-3000:] + last.stderr[-3000:]
    assert ran(last) == [SECOND]
