import os
import subprocess
import sys

import pandas as pd
import pytest

from lmperf.studies import e2e


def test_e2e_cli_writes_one_row_per_context_and_mode(tmp_path):
    out = tmp_path / "nested" / "nano.csv"
    cmd = [
        sys.executable,
        "-m",
        "lmperf.studies.e2e",
        "--size",
        "nano",
        "--context-lengths",
        "8,16",
        "--modes",
        "forward,train_step",
        "--warmup-steps",
        "1",
        "--measured-steps",
        "2",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    rows = pd.read_csv(out)
    assert list(zip(rows["context_length"], rows["mode"])) == [
        (8, "forward"),
        (8, "train_step"),
        (16, "forward"),
        (16, "train_step"),
    ]
    assert set(rows["status"]) == {"ok"}
    assert set(rows["study"]) == {"e2e"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--size", "huge", "--context-lengths", "8"], "--size: invalid choice: 'huge'"),
        (["--size", "nano", "--context-lengths", "8,x"], "--context-lengths"),
        (
            ["--size", "nano", "--context-lengths", "8", "--modes", "forward,sideways"],
            "--modes: unknown 'sideways'; choose from forward, forward_backward, train_step",
        ),
    ],
)
def test_e2e_cli_rejects_bad_arguments(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        e2e.parse_args([*argv, "--out", str(tmp_path / "x.csv")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


JOB = """
import atexit, logging, sys
from pathlib import Path
import ctypes
from lmperf.studies import run_study

class Torn:  # torn down with __main__'s globals: Python's finalization ran
    def __init__(self):
        self.touch = Path(sys.argv[1], "finalized").touch  # the globals may be gone by then

    def __del__(self):
        self.touch()

torn = Torn()

def main():
    atexit.register(lambda: Path(sys.argv[1], "at-exit").touch())  # e.g. a compile cache's last write
    logging.getLogger("lmperf.studies.test").info("rows written")
    print("a line through Python's stdout")
    ctypes.CDLL(None).printf(b"a line through C's stdout\\n")  # buffered: stdout is a pipe
    Path(sys.argv[1], "rows.csv").write_text("a\\n1\\n")
    if sys.argv[2] == "fail":
        raise ValueError("this study fails on purpose")

run_study(main, leave_at_once=sys.argv[3] == "at-once")
"""


@pytest.mark.parametrize("leave", ["at-once", "finalized"])
def test_a_study_job_ends_after_its_outputs_log_and_exit_handlers_and_fails_as_usual(tmp_path, leave):
    """A study run as a job (lmperf.studies.run_study) ends without tearing Python down, which holds
    the GPU a second or two more: its outputs, its log, what it printed (through Python or a C library,
    both buffered where stdout is a file) and what it registered to run at exit are complete all the
    same. A study that fails still fails, with its traceback."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a job runs: buffered
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path), "ok", leave], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and (tmp_path / "rows.csv").read_text() == "a\n1\n"
    assert "INFO lmperf.studies.test: rows written" in done.stderr
    assert "a line through Python's stdout" in done.stdout and "a line through C's stdout" in done.stdout
    assert (tmp_path / "at-exit").exists()
    assert (tmp_path / "finalized").exists() == (leave == "finalized")
    failed = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path), "fail", leave], capture_output=True, text=True, env=env
    )
    assert failed.returncode == 1 and "ValueError: this study fails on purpose" in failed.stderr
