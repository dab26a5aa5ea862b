"""SM clock and power sampled by nvidia-smi: the sampler's process on a stand-in nvidia-smi, the
parser on its output, and the ladder's sentence from the columns."""

import time

import pandas as pd
import torch

from lmperf.measure.power import hold, nvidia_smi_id, sampled
from lmperf.report.ladder_section import power_sentences

STAND_IN = """#!/usr/bin/env bash
# nvidia-smi as the sampler calls it: -i ID --query-gpu=... --format=... -lms MS
[[ $2 == GPU-test ]] || { echo "No devices were found"; exit 6; }
echo "1380, [N/A], 700.00"
while true; do echo "1380, 698.50, 700.00"; echo "1600, 690.25, 700.00"; sleep 0.05; done
"""


def stand_in(tmp_path, monkeypatch):
    script = tmp_path / "nvidia-smi"
    script.write_text(STAND_IN)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_samples_while_the_block_runs_and_stops_the_sampler(tmp_path, monkeypatch):
    stand_in(tmp_path, monkeypatch)
    with sampled("GPU-test") as gpu:
        time.sleep(0.3)
    columns = gpu.columns("replay_")
    assert columns["replay_gpu_samples"] >= 4 and columns["replay_gpu_samples"] % 2 == 0  # the [N/A] line is dropped
    assert 1380 <= columns["replay_sm_clock_mhz"] <= 1600 and columns["replay_power_limit_w"] == 700
    assert 690.25 <= columns["replay_power_w"] <= 698.5 and columns["replay_gpu_note"] == ""


def test_no_sample_is_nan_with_the_reason(tmp_path, monkeypatch):
    with sampled(nvidia_smi_id(torch.device("cpu"))) as gpu:
        pass
    assert gpu.columns("")["sm_clock_mhz"] != gpu.columns("")["sm_clock_mhz"]  # NaN
    assert gpu.reason == "no GPU to sample"
    stand_in(tmp_path, monkeypatch)
    with sampled("GPU-other") as gpu:
        time.sleep(0.1)
    assert gpu.columns("")["gpu_samples"] == 0 and gpu.reason == "nvidia-smi gave no sample: No devices were found"


def test_the_ladder_says_which_replays_ran_at_the_power_limit():
    ran = pd.DataFrame(
        {
            "rung": ["fused_adamw", "cuda_graph", "bf16_weights"],
            "replay_sm_clock_mhz": [float("nan"), 1590.0, 1375.0],
            "replay_power_w": [float("nan"), 660.0, 698.0],
            "replay_power_limit_w": [float("nan"), 700.0, 700.0],
        }
    )
    (sentence,) = power_sentences(ran)
    assert "`cuda_graph` 1590 MHz at 660 W; `bf16_weights` 1375 MHz at 698 W" in sentence
    assert "limit 700 W" in sentence and "1 of 2 replays ran at the power limit" in sentence
    assert "untimed" not in sentence  # rows of a run without the hold say nothing of it
    (sentence,) = power_sentences(ran.assign(replay_settle_s=[float("nan"), 5.0, 5.0]))
    assert sentence.endswith("Each replay ran 5 s untimed before it was timed.")
    assert power_sentences(ran.drop(columns=["replay_sm_clock_mhz"])) == []


def test_hold_runs_the_step_until_the_time_is_spent():
    ran = []
    assert hold(lambda: ran.append(time.sleep(0.01)), torch.device("cpu"), seconds=0.1) == len(ran)
    assert 5 <= len(ran) <= 11
    assert hold(lambda: ran.append(None), torch.device("cpu"), seconds=0) == 1  # at least once
