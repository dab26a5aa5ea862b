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
