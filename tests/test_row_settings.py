"""Rows carry the settings and targets their claims depend on, and the report states what it read.

Each report test renders committed reference rows twice: as they are (older rows without the column,
rendered with the value they were made with) and with the setting changed on the rows; the sentence
follows the rows."""

from pathlib import Path

import pandas as pd
import pytest

from lmperf.measure import Budget
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.measure.settings import MADE_WITH, setting
from lmperf.report import comm_section, e2e_section, flash_section, ladder_section, memory_section, render
from lmperf.report.e2e_analysis import physics_violations

REFERENCE = Path(__file__).resolve().parents[1] / "report/reference/h100"


@pytest.fixture(scope="module")
def e2e() -> pd.DataFrame:
    return e2e_section.handout_model(render.read(REFERENCE / "graphed/e2e.csv"))


def test_rows_of_the_e2e_harness_carry_their_timer_settings():
    spec = BenchmarkSpec(
        "nano",
        (8,),
        warmup_steps=0,
        budget=Budget(2, rel_halfwidth=0.07, max_steps=2),
        settle_seconds=0.5,
        host_bound_threshold=0.25,
    )
    rows = pd.DataFrame(run_benchmark(spec, modes=("forward",), device=pytest.importorskip("torch").device("cpu")))
    assert (rows["ci_halfwidth"] == 0.07).all()
    assert (rows["host_bound_threshold"] == 0.25).all()
    assert (rows["settle_seconds"] == 0.5).all()


def test_older_rows_render_with_the_values_they_were_made_with(e2e):
    assert "ci_halfwidth" not in e2e and setting(e2e, "ci_halfwidth") == MADE_WITH["ci_halfwidth"]
    assert "median's bootstrap 95% CI is within ±1% or" in e2e_section._method(e2e)


def test_several_values_of_a_setting_are_an_error_not_a_pick(e2e):
    mixed = e2e.assign(ci_halfwidth=[0.01, 0.02] * (len(e2e) // 2) + [0.01] * (len(e2e) % 2))
    with pytest.raises(ValueError, match="several values of ci_halfwidth"):
        setting(mixed, "ci_halfwidth")


def test_the_ci_target_in_the_e2e_text_is_the_rows(e2e):
    wider = e2e.assign(ci_halfwidth=0.05)
    assert "CI is within ±5% or" in e2e_section._method(wider)
    assert "within ±1%" not in e2e_section._method(wider)
    sentence, wide_sentence = e2e_section._ci_sentence(e2e), e2e_section._ci_sentence(wider)
    assert "have a 95% CI within ±1% (largest" in sentence
    assert "have a 95% CI within ±5% (largest" in wide_sentence
    assert wide_sentence.startswith("Repeatability: 100.0% of")  # every graphed median is within a 5% target


def test_the_host_bound_threshold_in_the_e2e_text_is_the_rows(e2e):
    assert "launched more than 10% over graphed" in e2e_section._method(e2e)
    assert "launched more than 25% over graphed" in e2e_section._method(e2e.assign(host_bound_threshold=0.25))


def test_the_physics_check_uses_the_rows_slack(e2e):
    assert "(2% slack)" in e2e_section._physics_sentence(e2e)
    assert "(0.5% slack)" in e2e_section._physics_sentence(e2e.assign(physics_slack=0.005))
    # a zero slack counts every inversion, however small: at least as many as the 2% default
    assert len(physics_violations(e2e.assign(physics_slack=0.0))) >= len(physics_violations(e2e))


def test_the_flash_host_bound_sentence_states_the_rows_threshold():
    sweep = render.read(REFERENCE / "flash-sweep-ws/flash_sweep.csv")
    group = sweep[sweep["status"] == "ok"]
    assert "launched median more than 10% over" in flash_section.graphed_sentences(group)[0]
    stricter = flash_section.graphed_sentences(group.assign(host_bound_threshold=0.3))[0]
    assert "launched median more than 30% over" in stricter


def test_the_memory_target_against_e2e_is_the_rows():
    directory = REFERENCE / "memory-ddp"
    memory, e2e = render.read(directory / "memory.csv"), render.read(directory / "e2e.csv")
    worst = memory_section.e2e_agreement(memory, e2e)["difference"].abs().max()
    text = memory_section.render(memory, render.read(directory / "memory_allocations.csv"), e2e)
    assert "(target: within 5%:" in text
    tight = memory.assign(e2e_agreement=worst / 2)
    tight_text = memory_section.render(tight, render.read(directory / "memory_allocations.csv"), e2e)
    assert f"(target: within {100 * worst / 2:g}%: **not met**)" in tight_text


def test_the_ladder_loss_target_is_the_rows():
    ladder = render.read(REFERENCE / "ladder/ladder.csv")
    first = ladder.iloc[0]
    point = ladder[(ladder["size"] == first["size"]) & (ladder["context_length"] == first["context_length"])]
    ran = point[point["status"] == "ok"].set_index("rung", drop=False)
    assert any("within 2% of it" in s or "outside 2% of it" in s for s in ladder_section.loss_check_sentences(ran))
    sentences = ladder_section.loss_check_sentences(ran.assign(loss_tolerance=0.5))
    assert any("every bf16 rung is within 50% of it" in s for s in sentences)


def test_the_fit_acceptance_in_the_comm_text_is_the_rows():
    directory = REFERENCE / "allreduce-x4"
    sweep, fits = render.read(directory / "allreduce.csv"), render.read(directory / "comm_fit.csv")
    assert "min_r2" not in fits and "(weighted R² < 0.95)" in comm_section.render(sweep, fits)
    stricter = comm_section.render(sweep, fits.assign(min_r2=0.99))
    assert "(weighted R² < 0.99)" in stricter and "(weighted R² < 0.95)" not in stricter


def test_the_flat_region_of_the_flash_sweep_is_the_rows():
    """Launched-only sweep rows: the sequences over which each fused kernel's time stays flat, and the
    sentence, follow the rows' flat_within."""
    sweep = render.read(REFERENCE / "flash_sweep.csv")
    group = sweep[(sweep["status"] == "ok") & (sweep["pass"] == "forward_backward")]
    group = group[(group["dtype"] == group["dtype"].iloc[0]) & (group["d"] == group["d"].iloc[0])]
    wide = group.assign(flat_within=1000.0)
    assert flash_section.host_bound_up_to(wide) == group["seq"].max()  # every time within 1000x: all flat
    assert flash_section.host_bound_up_to(group.assign(flat_within=1.0 + 1e-9)) <= flash_section.host_bound_up_to(group)
    rendered = flash_section.render(render.read(REFERENCE / "leaderboard.csv"), sweep)
    assert "stays within 2× its time at seq" in rendered
    wider = flash_section.render(render.read(REFERENCE / "leaderboard.csv"), sweep.assign(flat_within=3.0))
    assert "stays within 3× its time at seq" in wider and "within 2×" not in wider


def test_the_power_limit_share_in_the_ladder_text_is_the_rows():
    """Rows with no clock-event reasons: a replay counts as held by the power limit from the rows'
    power_limit_share of it."""
    ladder = render.read(REFERENCE / "ladder-turns/ladder.csv")
    (made_with,) = [s for s in ladder_section.point_sentences(ladder) if "SM clock and power" in s]
    assert "ran at the power limit (≥ 97% of it)" in made_with
    (lenient,) = [
        s for s in ladder_section.point_sentences(ladder.assign(power_limit_share=0.5)) if "SM clock and power" in s
    ]
    replays = int((ladder["replay_sm_clock_mhz"].notna() & (ladder["status"] == "ok")).sum())
    assert f"{replays} of {replays} replays ran at the power limit (≥ 50% of it)" in lenient


def test_the_share_of_allocations_listed_is_the_rows():
    directory = REFERENCE / "memory-ddp"
    memory, e2e = render.read(directory / "memory.csv"), render.read(directory / "e2e.csv")
    allocations = render.read(directory / "memory_allocations.csv")
    assert "Largest allocations (top 10% by size;" in memory_section.render(memory, allocations, e2e)
    wider = memory_section.render(memory, allocations.assign(largest_share=0.25), e2e)
    assert "Largest allocations (top 25% by size;" in wider


def test_the_flash_sweep_writes_its_flat_region_rule_and_launched_target_on_its_rows(tmp_path):
    from lmperf.studies import flash

    out = tmp_path / "sweep.csv"
    flash.main(["sweep", "--flat-within", "3", "--launched-within", "1.5", "--seq-lengths", "128", "--out", str(out)])
    rows = pd.read_csv(out)
    assert (rows["flat_within"] == 3).all() and (rows["launched_within"] == 1.5).all()
