"""The whole report rendered from a smoke-grid run on a CPU (tests/data/smoke-cpu, the aggregate
CSVs of one run): it reads right without running the pipeline. tests/test_pipeline.py checks the
same of a fresh run, slowly."""

import re
from pathlib import Path

import pytest

from conftest import table_problems
from lmperf.registry import BEYOND_HANDOUT, HANDOUT, heading
from lmperf.report import render

RUN = Path(__file__).parent / "data/smoke-cpu"


@pytest.fixture(scope="module")
def report() -> str:
    return render.render(RUN, "smoke")


def test_every_table_renders_and_fits_a_screen(report):
    assert table_problems(report) == []


def test_a_cpu_run_says_nothing_of_a_gpu(report):
    for gpu_only in (
        "GPU busy",
        "timed with CUDA events",
        "GPU-minutes",
        "graphed (ms)",
        "few seconds",
        "busy fraction",
    ):
        assert gpu_only not in report, gpu_only
    assert "no GPU time" in report
    device = render.read(RUN / "e2e.csv")["device_name"].iloc[0]
    assert device not in ("x86_64", "aarch64") and f"Device **{device}** (CPU)" in report


def test_numbers_read_as_their_values(report):
    assert not re.search(r"(?<![\d.])(\d[\d.]*[%×]?)–\1(?![\d.])", report)  # no "101%–101%"
    assert not re.search(
        r"\bby -[\d.]+(?![\d.]* to \+)", report
    )  # direction words follow the sign; a signed range has both
    assert not re.search(r"\b1 (warm-up|measured|untimed) steps\b", report)
    communication = report.split("## Communication", 1)[1]
    assert not re.search(r"\|\s*-?inf\s*\|", communication)  # a fit with no bandwidth shows a dash, not "inf"
    for line in (line for line in report.splitlines() if not line.startswith("|")):
        assert not (re.search(r"\d µs", line) and re.search(r"\d ms\b", line)), line


def test_the_summary_opens_the_report_with_computed_numbers(report):
    assert report.index("## Summary") < report.index("## End-to-end benchmarking")
    summary = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    cost = render.read(RUN / "cost.csv")
    assert f"{len(cost)} measuring jobs, {cost['wall_s'].sum() / 60:.2f} minutes of wall time, no GPU time" in summary
    e2e = render.read(RUN / "e2e.csv")
    largest = e2e[
        (e2e["attention"] == "naive")
        & (e2e["mode"] == "train_step")
        & (e2e["precision"] == "fp32")
        & (e2e["compile"] == "eager")
    ].sort_values("params")
    assert (
        f"**Train step** (launched): {largest['median_ms'].iloc[-1]:.2f} ms for {largest['size'].iloc[-1]}" in summary
    )
    headings = [re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^## (.+)$", report, re.M)]
    links = re.findall(r"\]\(#([\w-]+)\)", summary)
    assert len(links) >= 6 and set(links) <= set(headings)  # every finding links a section of the report


def test_every_cross_check_runs_on_a_cpu(report):
    assert "(a) The profiler's forward time differs from the e2e study's" in report
    assert "Cross-check: the steady-state trace peak here against the e2e study's" in report
    assert "measured none of these points" not in report and "No e2e row of the profiled" not in report


def test_the_cost_counts_no_gpu_minutes_for_a_cpu_run():
    cost = render.read(RUN / "cost.csv")
    assert (cost["device_type"] == "cpu").all() and (cost["gpus"] == 0).all()


def test_embedded_figures_have_data(report):
    """The figures a CPU run cannot draw are named in a line that says why, not embedded."""
    embedded = set(re.findall(r"\]\(figures/([^)]+)\.png\)", report))
    for empty in ("e2e_host_overhead", "e2e_time_vs_size", "e2e_backward_ratio", "ddp_timeline", "flash_tflops"):
        assert empty not in embedded
    assert "not drawn, a kernel timeline needs CUDA" in report


# The handout's deliverables that ask for numbers (CS336 Assignment 2, spring 2025), in its order.
DELIVERABLES = [
    "benchmarking_script",
    "nsys_profile",
    "mixed_precision_accumulation",
    "benchmarking_mixed_precision",
    "memory_profiling",
    "pytorch_attention",
    "torch_compile",
    "flash_benchmarking",
    "distributed_communication_single_node",
    "naive_ddp_benchmarking",
    "minimal_ddp_flat_benchmarking",
    "ddp_overlap_individual_parameters_benchmarking",
    "ddp_bucketed_benchmarking",
    "communication_accounting",
    "optimizer_state_sharding_accounting",
]


def test_the_index_links_every_handout_question_to_a_heading_of_the_report(report):
    start = report.index("## Where each question is answered")
    index = report[start : report.index("\n## ", start + 1)]
    rows = [line for line in index.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", row)[1] for row in rows] == DELIVERABLES
    rendered = set(re.findall(r"^## (.+)$", report, flags=re.MULTILINE))
    named = {heading(place) for _, _, places in HANDOUT + BEYOND_HANDOUT for place in places}
    assert named <= rendered, f"the index names headings the report does not render: {named - rendered}"
    links = re.findall(r"\]\((#[^)]+)\)", index)
    assert len(links) == sum(len(places) for _, _, places in HANDOUT + BEYOND_HANDOUT)
    assert "#communication-accounting-xxl-computed" in links and "#where-does-the-host-stop-mattering" in links
    assert "not in this grid" not in index  # the smoke grid holds every study


def test_the_index_says_which_questions_a_grid_leaves_out():
    report = render.render(RUN, "smoke", skip=("profile",))
    profile = next(line for line in report.splitlines() if line.startswith("| `nsys_profile`"))
    memory = next(line for line in report.splitlines() if line.startswith("| `memory_profiling`"))
    assert profile.endswith("| not in this grid |") and memory.endswith("[Memory](#memory) |")
