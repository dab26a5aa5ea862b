"""SM clock and power sampled by nvidia-smi: the sampler's process on a stand-in nvidia-smi, the
parser on its output, and the ladder's sentence from the columns."""

import time

import pandas as pd
import pytest
import torch

from lmperf import registry
from lmperf.measure import power, turns
from lmperf.measure.power import SETTLE_WINDOW_S, Samples, hold, nvidia_smi_id, sampled
from lmperf.measure.timing import Budget, Timings
from lmperf.measure.turns import Turn, pooled, turn_columns
from lmperf.report.ladder_section import power_sentences, turn_sentences

STAND_IN = """#!/usr/bin/env bash
# nvidia-smi as the sampler calls it: -i ID --query-gpu=... --format=... -lms MS
[[ $2 == GPU-test ]] || { echo "No devices were found"; exit 6; }
echo "1380, [N/A], 700.00, 60, 0x0000000000000004"
while true; do
    echo "1380, 698.50, 700.00, 61, 0x0000000000000004"; echo "1600, 690.25, 700.00, 63, 0x0000000000000000"; sleep 0.05
done
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
    assert 61 <= columns["replay_temperature_c"] <= 63 and columns["replay_clock_event_reasons"] == "0x4"


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
    rule = {"settle_seconds": 3.0, "settle_window_s": 0.25, "settle_windows": 3, "settle_tolerance": 0.005}
    held = ran.assign(**rule, replay_turn_settle_s=[None, "0.75;0.80", "1.50;2.25"])
    (sentence,) = power_sentences(held)
    assert sentence.endswith(
        "Each replay ran untimed until its time per step stopped moving (3 windows of 0.25 s in a row with medians "
        "within 0.5%): 1.15 s median, 2.25 s at most, of the 3 s allowed before it was timed."
    )
    (sooner,) = power_sentences(held.assign(settle_far_below=0.8))
    assert (
        "0.5%), or sooner where its instantaneous power stayed below 80% of the limit at the top SM clock: 1.15"
        in sooner
    )
    (again,) = power_sentences(held.assign(settle_far_below=0.75, replay_turn_retimed=[None, 1, "0;0"]))
    assert (
        "top SM clock (a block then timed nearer the limit was held again and timed again: 1 of 3 blocks here)" in again
    )
    declared = held[[c for c in held.columns if c in registry.declared("ladder")]]
    assert power_sentences(declared) == [sentence]  # the section reads only columns the ladder declares
    older = ran.assign(settle_seconds=3.0, replay_turn_settle_s=None)  # rows that held the whole time
    assert power_sentences(pd.concat([held, older]))[0].endswith("of the 3 s allowed before it was timed.")
    (unheld,) = power_sentences(ran.assign(**rule | {"settle_seconds": 0.0}, replay_turn_settle_s="0.01"))
    assert "untimed" not in unheld  # settle_seconds 0: one step, no hold to state
    assert power_sentences(ran.drop(columns=["replay_sm_clock_mhz"])) == []


class Clock:
    """A stand-in for the wall clock that moves only when a step runs: ``times`` gives each step's length."""

    def __init__(self, times):
        self.now, self.times, self.steps = 0.0, times, 0

    def default_timer(self):
        return self.now

    def step(self):
        self.now += self.times(self.steps)
        self.steps += 1


def hold_on(clock, monkeypatch, seconds):
    monkeypatch.setattr(power, "timeit", clock)
    return hold(clock.step, torch.device("cpu"), seconds)


def test_a_steady_step_is_held_three_windows_not_the_whole_time(monkeypatch):
    clock = Clock(lambda i: 0.01)
    steps, held_s, far_below = hold_on(clock, monkeypatch, seconds=5)
    assert steps == clock.steps == 3 * 25 and held_s == pytest.approx(3 * SETTLE_WINDOW_S) and not far_below


def test_a_step_that_slows_down_is_held_until_it_stops_slowing(monkeypatch):
    """Like a GPU reaching its power limit: each step 1% slower than the last for 100 steps, then steady."""
    clock = Clock(lambda i: 0.01 * 1.01 ** min(i, 100))
    steps, *_ = hold_on(clock, monkeypatch, seconds=30)
    assert 100 < steps < 100 + 4 * 25  # steady from step 100: three windows of ~19 steps, and the one it began in


def test_a_hold_never_runs_past_its_time_and_runs_at_least_once(monkeypatch):
    clock = Clock(lambda i: 0.01 * 1.02**i)  # never steady
    steps, held_s, _ = hold_on(clock, monkeypatch, seconds=2)
    assert 2 <= held_s < 2 + clock.times(steps) and steps == clock.steps
    assert hold_on(Clock(lambda i: 0.01), monkeypatch, seconds=0) == (1, 0.01, False)


PROBE_STAND_IN = """#!/usr/bin/env bash
# nvidia-smi as a hold's probe calls it (--query-gpu=power.draw.instant,...), printing $PROBE_LINES,
# and as the sampler of a timed block does, printing $SAMPLER_LINE
if [[ $3 == --query-gpu=power.draw.instant,* ]]; then
    while true; do cat "$PROBE_LINES"; sleep 0.02; done
fi
while true; do echo "$SAMPLER_LINE"; sleep 0.02; done
"""


def probe_stand_in(tmp_path, monkeypatch, lines, sampler="1980, 300.00, 700.00, 50, 0x0"):
    """A stand-in nvidia-smi on PATH, and every Probe the code makes, kept in the returned list."""
    script, samples = tmp_path / "nvidia-smi", tmp_path / "samples.csv"
    script.write_text(PROBE_STAND_IN)
    script.chmod(0o755)
    samples.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("PROBE_LINES", str(samples))
    monkeypatch.setenv("SAMPLER_LINE", sampler)
    probes, probe = [], power.Probe
    monkeypatch.setattr(power, "Probe", lambda gpu: probes.append(probe(gpu)) or probes[-1])
    return probes


FAR_BELOW_LINE = "150.00, 700.00, 1980, 1980, 0x0000000000000001"


@pytest.mark.parametrize(
    "lines, sooner",
    [
        ([FAR_BELOW_LINE], True),  # far below the limit, idle at most
        ([FAR_BELOW_LINE, "600.00, 700.00, 1980, 1980, 0x0"], False),  # one sample nearer it
        (["300.00, 700.00, 1755, 1980, 0x0"], False),  # the clock still below its top
        (["300.00, 700.00, 1980, 1980, 0x0000000000000004"], False),  # the power cap's reason
        (["[N/A], 700.00, 1980, 1980, 0x0"], False),  # no instantaneous power from this driver
    ],
)
def test_a_hold_ends_sooner_only_where_every_probe_sample_is_far_below_the_power_limit(
    lines, sooner, tmp_path, monkeypatch
):
    probes = probe_stand_in(tmp_path, monkeypatch, lines)
    steps, held_s, far_below = hold(lambda: time.sleep(0.005), torch.device("cpu"), 5, gpu="GPU-test")
    assert len(probes) == 1 and probes[0].process.poll() is not None  # the probe's nvidia-smi has exited
    assert far_below == sooner
    if sooner:
        assert power.PROBE_S <= held_s < SETTLE_WINDOW_S * power.SETTLE_WINDOWS and len(probes[0].samples.rows) >= 2
    else:
        assert held_s >= SETTLE_WINDOW_S * power.SETTLE_WINDOWS  # the steady windows' rule, as without a probe


def test_a_hold_the_probe_did_not_end_says_in_its_log_line_what_the_probe_found(tmp_path, monkeypatch, caplog):
    probe_stand_in(tmp_path, monkeypatch, ["300.00, 700.00, 1755, 1980, 0x0000000000000004"])
    with caplog.at_level("INFO", logger="lmperf.measure.power"):
        hold(lambda: time.sleep(0.005), torch.device("cpu"), 5, gpu="GPU-test")
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("held ")]
    assert line.endswith("of the power limit, SM clock down to 1755 of 1980 MHz, reasons 0x4)"), line
    assert " (probe: " in line and "samples, up to 42.9% of the power limit" in line  # steady, or at the most allowed


def test_a_hold_that_runs_out_of_time_while_the_probe_samples_stops_it(tmp_path, monkeypatch):
    probes = probe_stand_in(tmp_path, monkeypatch, [FAR_BELOW_LINE])
    assert hold(lambda: time.sleep(0.01), torch.device("cpu"), 0.05, gpu="GPU-test").far_below is False
    assert len(probes) == 1 and probes[0].process.returncode is not None  # killed and reaped


def test_a_hold_without_nvidia_smi_keeps_its_windows(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    steps, held_s, far_below = hold(lambda: time.sleep(0.005), torch.device("cpu"), 5, gpu="GPU-test")
    assert held_s >= SETTLE_WINDOW_S * power.SETTLE_WINDOWS and not far_below


@pytest.mark.parametrize(
    "sampler, timed",
    [
        ("1980, 300.00, 700.00, 50, 0x1", 1),  # far below, idle between steps: the timing stands
        ("1980, 530.00, 700.00, 60, 0x0", 2),  # 76% of the limit
        ("1965, 400.00, 700.00, 60, 0x4", 2),  # the power cap's reason
    ],
)
def test_a_block_timed_nearer_the_limit_than_its_probe_read_is_held_and_timed_again(
    sampler, timed, tmp_path, monkeypatch
):
    """The probe's first samples can read low: where the samples of the block timed after its hold
    show the power limit's reason or power over FAR_BELOW of it, the block is held by the windows
    alone and timed again, and the turn keeps the second timing and both holds. A block with no
    sample (shorter than the sampler's first) keeps its timing."""
    assert not Samples().nearer_the_limit()
    probe_stand_in(tmp_path, monkeypatch, [FAR_BELOW_LINE], sampler=sampler)
    measured, calls = turns.measure, []
    monkeypatch.setattr(turns, "measure", lambda *a, **k: calls.append(1) or measured(*a, **k))
    turn = turns.timed_block(
        "x", lambda: time.sleep(0.005), torch.device("cpu"), 1, Budget(3, max_seconds=0), 5, "GPU-test"
    )
    assert len(calls) == timed and len(turn.timings.host_s) == 3
    assert turn.settle_s >= (power.PROBE_S if timed == 1 else power.PROBE_S + SETTLE_WINDOW_S * power.SETTLE_WINDOWS)
    assert turn.clocks.nearer_the_limit() == (timed == 2)
    assert turn.retimed == (timed == 2)
    assert turn_columns([turn, turn])["replay_turn_retimed"] == ";".join([str(int(timed == 2))] * 2)


def test_turns_pool_into_one_measurement_and_keep_each_turn():
    first = Turn(Timings(host_s=[0.200, 0.202], warmup_s=[1.0]), Samples(rows=[(1650.0, 687.0, 700.0, 60.0, 4)]), 25)
    second = Turn(Timings(host_s=[0.176, 0.177, 0.178]), Samples(rows=[(1980.0, 460.0, 700.0, 55.0, 0)] * 2), 29)
    timings, clocks = pooled([first, second])
    assert timings.host_s == [0.200, 0.202, 0.176, 0.177, 0.178] and timings.warmup_s == [1.0]
    assert clocks.columns("")["gpu_samples"] == 3 and clocks.columns("")["sm_clock_mhz"] == 1980.0
    assert clocks.columns("")["clock_event_reasons"] == "0x4"  # seen in one sample of the pooled turns
    columns = turn_columns([first, second])
    assert columns["replay_turns"] == 2 and columns["replay_settle_steps"] == 54
    assert columns["replay_turn_ms"] == "201.0000;177.0000"
    assert (columns["replay_turn_sm_clock_mhz"], columns["replay_turn_power_w"]) == ("1650;1980", "687;460")
    assert (columns["replay_turn_temperature_c"], columns["replay_turn_clock_event_reasons"]) == ("60;55", "0x4;0x0")


def test_the_ladder_compares_graphed_rungs_turn_by_turn():
    ran = pd.DataFrame(
        {
            "rung": ["fused_adamw", "cuda_graph", "bf16_weights"],
            "on_ladder": [True, True, True],
            "replay_turns": [1, 2, 2],
            "replay_turn_ms": ["176.2", "176.0;201.0", "166.0;190.0"],
            "replay_turn_sm_clock_mhz": ["1980", "1980;1650", "1965;1620"],
            "replay_turn_power_w": ["460", "460;687", "520;687"],
        }
    )
    spread, step = turn_sentences(ran)
    assert "`cuda_graph` 176.0 / 201.0 ms (1980 / 1650 MHz, 460 / 687 W)" in spread
    assert "fused_adamw" not in spread  # one turn: nothing to compare
    assert "Largest spread between one rung's turns: 14.5% (`bf16_weights`)" in spread
    assert step == "- `bf16_weights` over `cuda_graph`, turn by turn: 1.06×, 1.06×."
    assert turn_sentences(ran.drop(columns=["replay_turns"])) == []


def test_the_power_limit_is_read_from_the_clock_event_reasons_or_the_hottest_turn():
    ran = pd.DataFrame(
        {
            "rung": ["fused_adamw", "cuda_graph", "bf16_weights"],
            "replay_sm_clock_mhz": [1980.0, 1980.0, 1810.0],
            "replay_power_w": [460.0, 436.0, 520.0],
            "replay_power_limit_w": [700.0, 700.0, 700.0],
            "replay_turns": [1, 2, 2],
            "replay_turn_power_w": ["460", "435;438", "416;690"],
        }
    )
    (sentence,) = power_sentences(ran)  # a pooled 520 W hides a turn at 690 W
    assert "pooled over each rung's turns" in sentence
    assert "1 of 3 replays ran at the power limit (≥ 97% of it) in any turn" in sentence
    (sentence,) = power_sentences(ran.assign(replay_clock_event_reasons=["0x0", "0x0", "0x24"]))
    assert (
        "1 of 3 replays had their clock held by the power cap (reason 0x4 in a sample), 1 by a thermal limit"
        in sentence
    )
