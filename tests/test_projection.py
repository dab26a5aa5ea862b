"""What a grid will cost before it runs (lmperf.report.projection): each job charged its measured cost
or its study's median, scheduled onto N GPUs; and the committed projection recomputed from its files."""

import functools
import heapq
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, copy_pipeline, dry_run_jobs, snakemake
from lmperf import grid
from lmperf.measure.stats import split_ms
from lmperf.report.projection import (
    fill_slice_pairs,
    job_list,
    kind,
    main,
    makespan,
    priorities,
    priority,
    project,
    summary,
    target,
)

SLICE = ROOT / "report" / "reference" / "one-allocation"
SECTION_12 = ("head-932eda2", "head-d4346d8")  # the runs of the README's section 12
SECTION_13 = "head-d3ed14d"  # the run of its section 13, which replaces some of section 12's charges
SECTION_14 = "head-6e3f832"  # the run of its section 14, which replaces some earlier charges
SECTION_16 = "head-7ae2b01"  # the run of its section 16, which replaces some of section 14's charges
SECTION_17 = "head-70a4026"  # the run of its section 17, which replaces some earlier charges
SECTION_18 = "head-eeba841"  # the run of its section 18, which replaces some of section 17's charges
SECTION_19 = "head-60b6739"  # the run of its section 19, which replaces older and estimated charges
# The slice's runs whose jobs job_costs.py charges as measured, in its order: a later run's cost of a job
# replaces an earlier's. (Charges it scales, such as the holds added to e2e jobs, are tested apart.)
RUNS = (
    "head-8f96bdc",
    "head-507f3e6",
    "head-7bc5294",
    "head-5cda776",
    "head-dd2cc4a",
    "head-d3fc0d3",
    "cuts/probe/with",
    "head-a41e378",
    *SECTION_12,
    SECTION_13,
    SECTION_14,
    SECTION_16,
    SECTION_17,
    SECTION_18,
    SECTION_19,
)


def benchmark_wall(tsv) -> float:
    """A job's wall time: the `s` column of its `benchmark:` file."""
    return pd.read_csv(tsv, sep="\t")["s"].iloc[-1]


def cost_split(tsv) -> pd.Series:
    """A job's seconds by phase: the cost split beside its `benchmark:` file."""
    return pd.read_csv(tsv.with_suffix(".cost.csv")).set_index("phase")["seconds"]


def table_row(lines, label: str) -> str:
    """The README table's line for ``label`` (its first cell), or "" where there is none."""
    return next((x for x in lines if x.startswith(f"| {label} | ")), "")


def readme_section(start: str, end: str) -> str:
    """The slice README's text from the heading ``start`` to the heading ``end``."""
    readme = (SLICE / "README.md").read_text()
    return readme[readme.index(start) : readme.index(end)]


def draw_saving() -> float:
    """What a restore saves by copying kept weights: the median draw less the median copy of the
    restore log (notes/e2e_restore.py)."""
    restore = (ROOT / "notes/logs/2026-11-30-e2e_restore-d4346d8-h200.txt").read_text().splitlines()
    turns = [line.split(" | ") for line in restore if line[:1].isdigit() and " | " in line]
    return statistics.median(float(t[1]) for t in turns) - statistics.median(float(t[2]) for t in turns)


def graphed_halfwidth(rows: pd.DataFrame) -> pd.Series:
    """Each row's graphed 95% CI half-width, as a share of its graphed median."""
    return (rows["graphed_ci95_high_ms"] - rows["graphed_ci95_low_ms"]) / 2 / rows["graphed_median_ms"]


def holds(log: Path) -> list[tuple[float, str]]:
    """A job log's holds (lmperf.measure.power.hold): the seconds of each, and why it ended."""
    return [
        (float(s), why) for s, why in re.findall(r"power: held \d+ steps for ([\d.]+) s: (.+)$", log.read_text(), re.M)
    ]


SOURCES = {"cuts/probe/with": "cuts/probe"}  # a run's name in job_costs.csv's `source`, where not its folder


def charged_run(job: str, run: str, until: str | None = None) -> str:
    """The run whose cost of ``job`` job_costs.py charges: ``run``, or the last run after it (and
    before the run ``until``, where given) that measured the job again."""
    later = RUNS[RUNS.index(run) : RUNS.index(until) if until else None]
    return [r for r in later if (SLICE / r / job).exists()][-1]


def assert_charged(costs: pd.DataFrame, job: str, run: str, until: str | None = None) -> None:
    """job_costs.csv (or the costs before the run ``until``) charges ``job`` what ``run`` measured,
    unless a later run measured it again: then that run's wall time; either way named by the run as
    its source."""
    last = charged_run(job, run, until)
    assert costs.loc[job, "wall_s"] == benchmark_wall(SLICE / last / job), (job, last)
    assert costs.loc[job, "source"] == SOURCES.get(last, last), (job, last)


def cost_table(run_name: str, lines: list[str], costs: pd.DataFrame, before) -> tuple[dict, dict]:
    """Each job of the slice's run ``run_name`` is charged as measured (``assert_charged``), and its row
    of a README section's cost table (``lines``) is its charge before (``before(job)``), its wall time,
    its cost split and the seconds after the split (its exit). Returns the jobs' wall times and charges
    before."""
    run, walls, charged = SLICE / run_name, {}, {}
    for tsv in sorted(run.glob("benchmarks/**/*.tsv")):
        job = "benchmarks/" + str(tsv.relative_to(run / "benchmarks"))
        walls[job], split, charged[job] = benchmark_wall(tsv), cost_split(tsv), before(job)
        assert_charged(costs, job, run_name)
        cells = [charged[job], walls[job], *split[["start", "build", "warmup", "capture", "settle", "timed"]]]
        cells += [*split[["profile", "check"]], split[["write", "other"]].sum()]
        row = " | ".join(f"{v:.1f}" for v in cells) + f" | {walls[job] - split.sum():.2f} |"
        line = table_row(lines, " ".join(Path(job).with_suffix("").parts[1:]))
        assert line.endswith(row), (job, line)
    return walls, charged


def earlier_wall(job: str, run: str) -> float:
    """What job_costs.py charged ``job`` before ``run``'s jobs: the last earlier run's benchmark of it
    (``../flash-sweep-rounds`` counted first, as it charges fewer jobs than any run after it)."""
    earlier = [SLICE.parent / "flash-sweep-rounds", *(SLICE / r for r in RUNS[: RUNS.index(run)])]
    return benchmark_wall([r for r in earlier if (r / job).exists()][-1] / job)


def job_costs(out: Path, *without: str, **run) -> subprocess.CompletedProcess:
    """job_costs.py run from the project's root, its costs written to ``out``, each run of ``without``
    left out (``--without``); ``run`` are subprocess.run's options."""
    script = [sys.executable, str(SLICE / "job_costs.py"), str(SLICE.relative_to(ROOT)), str(out)]
    return subprocess.run([*script, *(arg for r in without for arg in ("--without", r))], cwd=ROOT, **run)


@functools.cache
def _costs_without(runs: tuple[str, ...]) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "job_costs.csv"
        job_costs(out, *runs, check=True, stdout=subprocess.DEVNULL)
        return pd.read_csv(out)


def costs_before(run: str | None = None) -> pd.DataFrame:
    """job_costs.csv, or, given ``run`` (one that job_costs.py charges as measured), as it was before
    that run's jobs were charged: job_costs.py with that run and every later one left out
    (``--without``)."""
    if run is None:
        return pd.read_csv(SLICE / "job_costs.csv")
    return _costs_without(RUNS[RUNS.index(run) :]).copy()


def committed_jobs(jobs_name: str, n_gpus: int, before: str | None = None) -> pd.DataFrame:
    """The grid's jobs of ``jobs_name`` charged the committed costs (before the run ``before``, if
    given), those that fit ``n_gpus`` GPUs."""
    projected = project(pd.read_csv(SLICE / jobs_name), costs_before(before))
    return projected[projected["gpus"] <= n_gpus]


def longest_first_minutes(jobs_name: str, n_gpus: int, before: str | None = None) -> float:
    """The committed costs' (before the run ``before``, if given) wall time on ``n_gpus`` GPUs as
    projected before section 15: the longest job first, each given the GPUs that freed first and
    holding them until it could start (a README section written then states it)."""
    projected = committed_jobs(jobs_name, n_gpus, before).sort_values("wall_s", ascending=False)
    free_at, end = [0.0] * n_gpus, 0.0
    for wall, need in zip(projected["wall_s"], projected["gpus"]):
        start = max((heapq.heappop(free_at) for _ in range(need)), default=0.0)
        for _ in range(need):
            heapq.heappush(free_at, start + wall)
        end = max(end, start + wall)
    return end / 60


def jobs(*rows):
    return job_list([f"benchmarks/{study}/{name}.tsv" for study, name, _ in rows], [gpus for *_, gpus in rows])


def test_a_job_is_charged_its_measured_cost_else_its_studys_median():
    grid = jobs(("e2e", "a", 1), ("e2e", "b", 1), ("e2e", "c", 1), ("ddp", "n2", 2))
    costs = pd.DataFrame(
        {"job": ["benchmarks/e2e/a.tsv", "benchmarks/e2e/b.tsv", "benchmarks/ddp/n2.tsv"], "wall_s": [60, 180, 30]}
    )
    projected = project(grid, costs).set_index("job")
    assert projected.loc["benchmarks/e2e/c.tsv", "wall_s"] == 120
    assert projected["estimated"].tolist() == [False, False, True, False]
    table = summary(project(grid, costs), n_gpus=4).set_index("study")
    assert table.loc["e2e", "gpu_min"] == pytest.approx((60 + 180 + 120) / 60)
    assert table.loc["ddp", "gpu_min"] == pytest.approx(30 * 2 / 60)  # wall time x the GPUs held
    assert table.loc["all", "estimated"] == 1


def test_an_unmeasured_job_is_charged_its_kinds_median_before_its_studys():
    grid = jobs(("ddp", "train-n2-b16", 2), ("ddp", "train-n4-b16", 4), ("ddp", "timeline-n2", 2))
    costs = pd.DataFrame(
        {"job": ["benchmarks/ddp/train-n2-b16.tsv", "benchmarks/ddp/timeline-n2.tsv"], "wall_s": [200.0, 40.0]}
    )
    projected = project(grid, costs).set_index("job")
    assert projected.loc["benchmarks/ddp/train-n4-b16.tsv", "wall_s"] == 200.0  # a train job, not the study's 120
    assert kind("benchmarks/flash/sweep/bf16-d64.tsv") == kind("benchmarks/flash/sweep/fp32-d128.tsv")


def test_a_cost_measured_on_a_cpu_is_not_a_gpu_cost():
    grid = jobs(("e2e", "a", 1), ("e2e", "b", 1))
    costs = pd.DataFrame(
        {"job": ["benchmarks/e2e/a.tsv", "benchmarks/e2e/b.tsv"], "wall_s": [5.0, 90.0], "device_type": ["cpu", "cuda"]}
    )
    projected = project(grid, costs).set_index("job")
    assert (
        projected.loc["benchmarks/e2e/a.tsv", "wall_s"] == 90.0 and projected.loc["benchmarks/e2e/a.tsv", "estimated"]
    )


def test_priorities_put_the_jobs_holding_more_gpus_then_the_longest_first_from_the_cost_files_that_exist(tmp_path):
    """A run's priorities are the GPUs held, then the projected seconds: measured, else the kind's
    median; a later cost file wins; a missing file is passed over; with no file, or a study none of
    them costs, no order."""
    grid = {"benchmarks/e2e/a.tsv": 1, "benchmarks/e2e/b.tsv": 1, "benchmarks/ddp/n2.tsv": 2}
    reference, own = tmp_path / "reference.csv", tmp_path / "cost.csv"
    pd.DataFrame({"job": list(grid)[:2] + ["benchmarks/ddp/n2.tsv"], "wall_s": [60.4, 180.0, 30.0]}).to_csv(
        reference, index=False
    )
    pd.DataFrame({"job": ["benchmarks/e2e/a.tsv"], "wall_s": [300.0]}).to_csv(own, index=False)
    assert priorities(grid, [str(reference), str(tmp_path / "absent.csv")]) == {
        "benchmarks/e2e/a.tsv": 10_060,
        "benchmarks/e2e/b.tsv": 10_180,
        "benchmarks/ddp/n2.tsv": 40_030,  # the shortest, but it holds two GPUs: first
    }
    assert priorities(grid, [str(reference), str(own)])["benchmarks/e2e/a.tsv"] == 10_300  # the run's own cost
    assert priorities({**grid, "benchmarks/e2e/c.tsv": 1}, [str(reference)])["benchmarks/e2e/c.tsv"] == 10_120
    assert priorities(grid, [str(tmp_path / "absent.csv")]) == {}
    for broken in ("", "job,seconds\nbenchmarks/e2e/a.tsv,1\n", "job,wall_s\nbenchmarks/e2e/a.tsv,fast\n"):
        own.write_text(broken)  # empty, no wall_s column, not a number: passed over, the reference's costs hold
        assert priorities(grid, [str(reference), str(own)])["benchmarks/e2e/a.tsv"] == 10_060
    assert priorities({**grid, "benchmarks/ladder/x.tsv": 1}, [str(reference)]) == {}  # no ladder cost: no order


def test_the_pipeline_orders_jobs_by_gpus_then_length_and_imports_no_torch_to_order_it(tmp_path):
    """In a dry run of the full grid each measuring job carries its GPUs and projected seconds as its
    priority (from the reference's costs): the longest of the jobs holding the most GPUs the highest,
    and among one-GPU jobs the longest the highest; the projection, which the Snakefile imports to
    order the jobs, imports no torch, so the DAG still builds fast."""
    workdir = copy_pipeline(tmp_path)
    (workdir / "report/reference/one-allocation").mkdir(parents=True)
    shutil.copy2(SLICE / "job_costs.csv", workdir / "report/reference/one-allocation/job_costs.csv")
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")["wall_s"]
    ran = dry_run_jobs(workdir, "--config", "grid=full", "device=cuda")
    measured = {job["benchmark"]: int(job["priority"] or 0) for job in ran if job["benchmark"] in costs.index}
    gpus = pd.read_csv(SLICE / "jobs.csv").set_index("job")["gpus"]
    unmeasured = set(gpus.index) - set(costs.index)  # the 4-rank sharding job; the 6-rank NCCL job, skipped on four
    assert set(measured) == set(gpus.index) & set(costs.index) and len(unmeasured) <= 2
    assert all(p == gpus[job] ** 2 * 10_000 + round(costs[job]) for job, p in measured.items())
    most = [job for job in measured if gpus[job] == max(gpus[list(measured)])]
    assert max(measured, key=measured.get) == max(most, key=costs.get)
    one = {job: p for job, p in measured.items() if gpus[job] == 1}
    assert max(one, key=one.get) == costs[list(one)].idxmax()
    check = "import sys, lmperf.report.projection; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_a_study_with_no_measured_job_is_refused_by_name():
    grid = jobs(("e2e", "a", 1), ("ladder", "x", 1))
    with pytest.raises(ValueError, match="ladder"):
        project(grid, pd.DataFrame({"job": ["benchmarks/e2e/a.tsv"], "wall_s": [10.0]}))


def test_the_last_cost_given_for_a_job_wins():
    grid = jobs(("e2e", "a", 1))
    costs = pd.DataFrame({"job": ["benchmarks/e2e/a.tsv"] * 2, "wall_s": [100.0, 40.0]})
    assert project(grid, costs)["wall_s"].tolist() == [40.0]


def test_the_schedule_puts_jobs_side_by_side_and_waits_for_a_multi_gpu_jobs_gpus():
    assert makespan([10, 10, 10, 10], [1, 1, 1, 1], n_gpus=4) == 10
    assert makespan([10, 10, 10, 10], [1, 1, 1, 1], n_gpus=2) == 20
    # the 4-GPU job runs alone: first, then the three one-GPU jobs side by side
    assert makespan([30, 10, 10, 10], [4, 1, 1, 1], n_gpus=4) == 40
    assert makespan([10, 30, 10, 10], [4, 1, 1, 1], n_gpus=4) == 40  # first though shorter
    assert makespan([10, 30], [1, 1], n_gpus=4) == 30  # never shorter than the longest job
    with pytest.raises(ValueError, match="0 GPUs"):
        makespan([10], [1], n_gpus=0)


def seconds(wall_s: float, gpus: int) -> float:
    """The order runs took before section 15: the longest first, whatever the GPUs."""
    return wall_s


def test_the_schedule_fills_gpus_as_they_free_in_the_runs_order():
    """In the old order, the 2-GPU job waits for the 10 s job; the 4 s job goes ahead on the free GPU
    (0-4 s) rather than idling it, and the 2-GPU job runs at 10-15 s. On three GPUs, longest first,
    the 2-GPU job waits until 10 s while one-GPU jobs fill the GPUs (18 s); first, it runs at 0-8 s
    beside the 10 s job, and the rest follow (16 s)."""
    assert makespan([10, 5, 4], [1, 2, 1], n_gpus=2, order=seconds) == 15
    jobs = ([5, 5, 8, 8, 10], [1, 1, 1, 2, 1])
    assert makespan(*jobs, n_gpus=3, order=seconds) == 18
    assert makespan(*jobs, n_gpus=3) == 16


def test_a_job_holding_more_gpus_goes_first():
    assert priority(5, 2) > priority(10, 1) > priority(4, 1)
    assert priority(20_000, 1) < priority(0, 2)  # a job's seconds count up to 9,999
    # Snakemake's scheduler starts the ready jobs whose priorities sum highest: a job holding g GPUs
    # outweighs any jobs that fill them with fewer GPUs each, however long
    longest = 9_999
    assert priority(1, 2) > 2 * priority(longest, 1)
    assert priority(1, 4) > max(
        4 * priority(longest, 1), 2 * priority(longest, 2), priority(longest, 2) + 2 * priority(longest, 1)
    )
    assert priority(1, 8) > max(priority(longest, 6) + priority(longest, 2), 2 * priority(longest, 4))
    assert priority(160.24, 4) == 160_160  # read in a dry run as four GPUs, 160 s


TOY_ORDER = """
rule all:
    input: [f"one-{i}" for i in range(4)] + ["four"]
rule one:
    output: "one-{i}"
    resources: device=1
    priority: PRIORITY_ONE
    shell: "python -c 'import time; print(time.time())' > {output}; sleep 0.5"
rule four:
    output: "four"
    resources: device=4
    priority: PRIORITY_FOUR
    shell: "python -c 'import time; print(time.time())' > {output}; sleep 0.5"
"""


@pytest.mark.parametrize(
    ("scheduler", "priorities", "four_first"),
    [
        ("ilp", (priority(100, 1), priority(10, 4)), True),  # ilp: Snakemake's default
        ("greedy", (priority(100, 1), priority(10, 4)), True),
        ("ilp", (100, 150), False),  # seconds alone: four 100 s jobs sum above the 150 s one
        ("greedy", (100, 150), True),  # the greedy scheduler takes the highest single priority
    ],
)
def test_snakemakes_schedulers_start_the_job_holding_more_gpus_first(tmp_path, scheduler, priorities, four_first):
    """Given four GPUs' worth of ``device``, four ready one-GPU jobs and a ready four-GPU job, each of
    Snakemake's schedulers starts the four-GPU job first under ``priority``. The controls, with each
    job's seconds as its priority: the ILP starts the set whose priorities sum highest (the one-GPU
    jobs), the greedy scheduler the single highest (the four-GPU job), so each scheduler was the one
    that ran (no fall-back from the ILP to the greedy one)."""
    one, four = priorities
    (tmp_path / "Snakefile").write_text(TOY_ORDER.replace("PRIORITY_ONE", str(one)).replace("PRIORITY_FOUR", str(four)))
    ran = snakemake(tmp_path, "--cores", "4", "--resources", "device=4", "--scheduler", scheduler)
    assert "falling back" not in (ran.stdout + ran.stderr).lower()
    started = {path.name: float(path.read_text()) for path in tmp_path.glob("one-*")}
    first_one, four_at = min(started.values()), float((tmp_path / "four").read_text())
    assert (four_at < first_one) == four_first


def test_a_job_needing_more_gpus_than_the_machine_has_is_charged_nothing():
    grid = jobs(("allreduce", "nccl-n6", 6), ("allreduce", "nccl-n2", 2))
    costs = pd.DataFrame({"job": grid["job"], "wall_s": [50.0, 20.0]})
    total = summary(project(grid, costs), n_gpus=4).set_index("study").loc["all"]
    assert total["gpu_min"] == pytest.approx(20 * 2 / 60)
    assert total["wall_min"] == pytest.approx(20 / 60)
    unmeasured = project(grid, costs.iloc[1:])  # the 6-rank job with no cost of its own: estimated ...
    assert summary(unmeasured, n_gpus=4).set_index("study").loc["all", "estimated"] == 0  # ... but skipped on 4
    assert summary(unmeasured, n_gpus=8).set_index("study").loc["all", "estimated"] == 1


@pytest.mark.parametrize(
    "grid_name, jobs_name",
    [("", ""), ("-wide", "-wide"), ("-gpus1", ""), ("-gpus2", ""), ("-gpus8", "")],
    ids=["full", "wide", "full-1-gpu", "full-2-gpus", "full-8-gpus"],  # wide: with wide.yaml's overlay
)
def test_the_committed_projection_is_recomputed_from_its_committed_files(grid_name, jobs_name):
    grid = pd.read_csv(SLICE / f"jobs{jobs_name}.csv")
    costs = pd.read_csv(SLICE / "job_costs.csv")
    committed = pd.read_csv(SLICE / f"projection{grid_name}.csv")
    recomputed = summary(project(grid, costs), int(committed["gpus"].iloc[0]))
    pd.testing.assert_frame_equal(recomputed.reset_index(drop=True), committed, check_dtype=False)


def test_the_committed_job_costs_are_what_job_costs_py_makes_of_the_committed_files(tmp_path):
    """job_costs.csv is job_costs.py's output from the slices' files, unchanged: a cost edited by hand,
    or a slice added without running it, fails here."""
    out = tmp_path / "job_costs.csv"
    job_costs(out, check=True)
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(SLICE / "job_costs.csv"))


def test_the_readmes_projection_table_and_totals_are_the_committed_projections():
    """Every row of the README's table is the two projections' row of that study, rounded as shown,
    and the bold sentence states the totals, as the project's README does."""
    full, wide = (pd.read_csv(SLICE / f"projection{name}.csv").set_index("study") for name in ("", "-wide"))
    readme = " ".join((SLICE / "README.md").read_text().split())
    for study, row in full.iterrows():
        name, bold = ("**all**", "**") if study == "all" else (study, "")
        cells = [
            name,
            int(row["jobs"]),
            int(row["estimated"]),
            f"{bold}{row['gpu_min']:.1f}{bold}",
            f"{row['longest_min']:.1f}",
        ]
        cells += [wide.loc[study, "jobs"], f"{bold}{wide.loc[study, 'gpu_min']:.1f}{bold}"]
        assert "| " + " | ".join(map(str, cells)) + " |" in readme, study
    total, total_wide = full.loc["all"], wide.loc["all"]
    assert (
        f"**Projected: {total['gpu_min']:.0f} GPU-minutes, and {total['wall_min']:.0f} minutes of wall time on four "
        f"GPUs**; with `wide.yaml`, {total_wide['gpu_min']:.0f} and {total_wide['wall_min']:.0f}"
    ) in readme
    on = {
        gpus: pd.read_csv(SLICE / ("projection.csv" if gpus == 4 else f"projection-gpus{gpus}.csv"))
        .set_index("study")
        .loc["all"]
        for gpus in (1, 2, 4, 8)
    }
    for gpus, total in on.items():
        assert int(total["gpus"]) == gpus
        assert f"| {gpus} | {total['gpu_min']:.1f} | {total['wall_min']:.1f} |" in readme, gpus
    total = full.loc["all"]
    project_readme = " ".join((ROOT / "README.md").read_text().split())
    index = " ".join((SLICE.parent / "README.md").read_text().split())  # report/reference's row for this slice
    assert (
        f"{total['gpu_min']:.0f} GPU-minutes, {total['wall_min']:.0f} minutes on four GPUs "
        f"({total_wide['gpu_min']:.0f} and {total_wide['wall_min']:.0f} with `wide.yaml`, a lower bound)"
    ) in index
    walls = {gpus: total["wall_min"] for gpus, total in on.items()}
    assert (
        f"{total['wall_min']:.0f} minutes or more on 4 GPUs, one job a GPU ({walls[2]:.0f} on 2, {walls[8]:.0f} on 8; "
        f"{walls[1] / 60:.1f} hours on 1, which skips DDP and NCCL)"
    ) in project_readme
    assert f"{total['gpu_min']:.0f} GPU-minutes, {total['wall_min']:.0f} minutes on 4 GPUs" in project_readme
    assert f"about {total['gpu_min'] / 60:.1f} GPU-hours; {total['wall_min']:.0f} minutes or more" in project_readme
    assert (
        f"({total_wide['gpu_min']:.0f} GPU-minutes, {total_wide['wall_min']:.0f} minutes on 4 GPUs)" in project_readme
    )


def test_the_jobs_rule_lists_every_measuring_job_of_the_grid_with_its_gpus(tmp_path: Path):
    copy_pipeline(tmp_path)
    snakemake(tmp_path, "--cores", "1", "--config", "grid=full", "device=cuda", "--", "results/jobs.csv")
    listed = pd.read_csv(tmp_path / "results" / "jobs.csv").set_index("job")
    assert listed.loc["benchmarks/e2e/2.7B/bf16-compiled.tsv", "gpus"] == 1
    assert listed.loc["benchmarks/allreduce/nccl-n4.tsv", "gpus"] == 4
    assert listed.loc["benchmarks/allreduce/gloo-n4.tsv", "gpus"] == 0  # CPU processes
    assert listed.loc["benchmarks/ddp/train-n2-b16.tsv", "study"] == "ddp"
    committed = pd.read_csv(SLICE / "jobs.csv").set_index("job")  # the projection's list is today's grid
    assert listed.sort_index().equals(committed.sort_index()[listed.columns])


def test_fill_slice_pairs_are_the_grids_jobs_charged_their_cost(capsys):
    """`projection targets` prints the jobs of the list as scripts/fill-slice takes them: each job's
    result and its charged wall time rounded up, a ladder point's checks in one pair with the timed job
    they wait for, and with --gpus only the jobs that fit."""
    main(["targets", "--jobs", str(SLICE / "jobs.csv"), "--costs", str(SLICE / "job_costs.csv")])
    pairs = capsys.readouterr().out.split()
    assert all(re.fullmatch(r"[^:]+:[0-9]+", pair) for pair in pairs)  # fill-slice's own check
    charged = project(pd.read_csv(SLICE / "jobs.csv"), pd.read_csv(SLICE / "job_costs.csv")).set_index("job")
    listed = [t for pair in pairs for t in pair.split(":")[0].split(",")]
    assert sorted(listed) == sorted(target(job) for job in charged.index)  # every job once
    for pair in pairs:
        targets, seconds = pair.split(":")
        jobs = ["benchmarks/" + t.removeprefix("results/").removesuffix(".csv") + ".tsv" for t in targets.split(",")]
        assert int(seconds) == math.ceil(charged.loc[jobs, "wall_s"].sum()), pair
        assert len(jobs) == 1 or (jobs[0].endswith("-timed.tsv") and jobs[1] == jobs[0].replace("-timed", ""))
    checks, timed = "benchmarks/ladder/2.7B/ctx1024.tsv", "benchmarks/ladder/2.7B/ctx1024-timed.tsv"
    assert target(timed) == "results/ladder/2.7B/ctx1024-timed.csv"
    assert f"{target(timed)},{target(checks)}:{math.ceil(charged.loc[[timed, checks], 'wall_s'].sum())}" in pairs
    assert sum("," in pair for pair in pairs) == 4  # the four ladder points
    one = fill_slice_pairs(charged.reset_index(), n_gpus=1)
    assert len(one) == len(pairs) - (charged["gpus"] > 1).sum() and not any("nccl" in p or "/ddp/" in p for p in one)


def test_the_measured_cut_is_what_scales_the_fp32_e2e_jobs_and_its_medians_agree():
    """cuts/e2e: the after / before wall time of the one job measured both ways is the ratio that
    job_costs.csv applies to every fp32 e2e job not measured since (two at head-a41e378, three in
    section 12; before section 19's run, which measured one again), and the
    README's; the two sides' naive medians agree (inside the other's CI or within 1%), as the README
    says."""
    cut = SLICE / "cuts/e2e"
    walls = [benchmark_wall(cut / side / "benchmarks/e2e/small/fp32-compiled.tsv") for side in ("after", "before")]
    ratio = walls[0] / walls[1]
    costs = costs_before(SECTION_19)
    measured_since = costs["source"].isin(["head-a41e378", *SECTION_12])
    fp32 = costs[costs["job"].str.match(r"benchmarks/e2e/[^/]+/fp32-") & ~measured_since]
    assert len(fp32) == 5 and fp32["source"].str.contains(f"x {ratio:.3f} (cuts/e2e)", regex=False).all()
    assert f"after / before ratio, {ratio:.3f}" in " ".join((SLICE / "README.md").read_text().split())
    before, after = (pd.read_csv(cut / side / "rows/e2e/small/fp32-compiled.csv") for side in ("before", "after"))
    assert set(after["attention"]) == {"naive"} and set(before["attention"]) == {"naive", "sdpa", "flash_triton"}
    assert set(after["commit"]) == {"292df6d89e6f"} and set(before["commit"]) == {"bacf46f"}
    pairs = before[before["attention"] == "naive"].merge(after, on=["context_length", "mode"], suffixes=("_b", "_a"))
    inside = (pairs["graphed_median_ms_a"] >= pairs["graphed_ci95_low_ms_b"]) & (
        pairs["graphed_median_ms_a"] <= pairs["graphed_ci95_high_ms_b"]
    )
    close = (pairs["graphed_median_ms_a"] / pairs["graphed_median_ms_b"] - 1).abs() <= 0.01
    assert len(pairs) == 6 and (inside | close).all()


def test_every_e2e_job_is_charged_the_holds_its_turns_added():
    """Every e2e job measured since its replays took turns (head-507f3e6, and since the hold probe
    cuts/probe and head-a41e378) is charged as measured, or as a later run measured it, its holds in
    its time; every other e2e job its
    last cost plus its added holds (12 points x (variants x 2 turns - 1)) at the measured cost a hold,
    named in `source`. (As the costs were before section 19's run, which measured two e2e jobs again.)"""
    costs = costs_before(SECTION_19).set_index("job")
    runs = {
        "head-507f3e6": SLICE / "head-507f3e6",
        "cuts/probe": SLICE / "cuts/probe/with",
        "head-a41e378": SLICE / "head-a41e378",
    }
    measured = [(source, tsv) for source, run in runs.items() for tsv in sorted(run.glob("benchmarks/e2e/*/*.tsv"))]
    assert len(measured) == 2 + 2 + 7
    for source, tsv in measured:
        job = "benchmarks/" + str(tsv.relative_to(runs[source] / "benchmarks"))
        assert_charged(costs, job, next(r for r in RUNS if SOURCES.get(r, r) == source), until=SECTION_19)
    later = costs["source"].str.startswith((*SECTION_12, SECTION_13, SECTION_16, SECTION_17))  # holds in their time too
    others = costs[costs.index.str.match(r"benchmarks/e2e/") & ~costs["source"].isin(runs) & ~later]
    assert len(others) == 5
    for job, row in others.iterrows():
        added = 12 * 5 if "/bf16-" in job else 12
        assert f" + {added} holds x " in row["source"] and "(head-d3fc0d3" in row["source"], job


def test_section_10s_probe_keeps_the_medians_and_its_jobs_are_charged_and_tabled_as_their_files_say():
    """cuts/probe: the holds with and without the power probe and the graphed medians' agreement, as
    section 10 states them from the rows; and its table: each job's benchmark and cost-split files,
    charged as measured in job_costs.csv."""
    readme = (SLICE / "README.md").read_text()
    text = " ".join(readme.split())
    keys = ["context_length", "mode", "attention"]
    held, agree, outside, sooner = {}, 0, [], 0
    for size in ("small", "medium"):
        with_, without = (
            pd.read_csv(SLICE / f"cuts/probe/{side}/rows/e2e/{size}/bf16-eager.csv") for side in ("with", "without")
        )
        assert set(with_["commit"]) == {"4c68dbe75c23"} and set(without["commit"]) == {"e012b9d8883c"}
        turns = {
            side: rows["graphed_turn_settle_s"].str.split(";").explode().astype(float)
            for side, rows in (("with", with_), ("without", without))
        }
        held[size] = (turns["without"].sum(), turns["with"].sum())
        sooner += int((turns["with"] < 0.75).sum())
        pairs = with_.merge(without, on=keys, suffixes=("_w", "_o"))
        ratio = pairs["graphed_median_ms_w"] / pairs["graphed_median_ms_o"]
        inside = pairs["graphed_median_ms_w"].between(
            pairs["graphed_ci95_low_ms_o"], pairs["graphed_ci95_high_ms_o"]
        ) | pairs["graphed_median_ms_o"].between(pairs["graphed_ci95_low_ms_w"], pairs["graphed_ci95_high_ms_w"])
        ok = inside | ((ratio - 1).abs() <= 0.01)
        agree += int(ok.sum())
        outside += ratio[~ok].tolist()
    (small_before, small_after), (medium_before, medium_after) = held["small"], held["medium"]
    assert (
        f"**Holds: {small_before:.1f} → {small_after:.1f} s at small, {medium_before:.1f} → {medium_after:.1f} s at "
        f"medium**; {sooner} of the 144 holds"
    ) in text
    assert f"**Medians: {agree} of 72 graphed medians agree**" in text
    assert f"The {72 - agree} others lie at {min(outside):.3f}-{max(outside):.3f}, both ways" in text
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    lines = readme[readme.index("## 10. ") :].splitlines()
    tsvs = sorted((SLICE / "cuts/probe/with").glob("benchmarks/**/*.tsv")) + sorted(
        (SLICE / "head-a41e378").glob("benchmarks/**/*.tsv")
    )
    assert len(tsvs) == 11
    for tsv in tsvs:
        relative = Path(*tsv.parts[tsv.parts.index("benchmarks") + 1 :])
        wall = benchmark_wall(tsv)
        assert_charged(costs, f"benchmarks/{relative}", str(tsv.relative_to(SLICE)).split("/benchmarks/")[0])
        split = cost_split(tsv)
        cells = [
            wall,
            *split[["start", "warmup", "capture", "settle", "timed"]],
            split[["build", "write", "other"]].sum(),
        ]
        label = " ".join(relative.with_suffix("").parts)
        line = table_row(lines, label)
        assert line.endswith(" | ".join(f"{v:.1f}" for v in cells) + " |"), (label, line)


def test_the_jobs_measured_again_are_charged_and_tabled_as_their_files_say():
    """Section 8's table: each job measured again is a row with its wall time and cost split, as its
    benchmark and cost-split files say, and job_costs.csv charges it that wall time."""
    readme = (SLICE / "README.md").read_text().splitlines()
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    measured = [
        (run, tsv) for run in ("head-507f3e6", "head-7bc5294") for tsv in (SLICE / run).glob("benchmarks/**/*.tsv")
    ]
    assert len(measured) == 7
    for run, tsv in measured:
        relative = tsv.relative_to(SLICE / run / "benchmarks")
        wall = benchmark_wall(tsv)
        assert_charged(costs, f"benchmarks/{relative}", run)
        split = cost_split(tsv)
        cells = [wall, *split[["start", "warmup", "capture", "settle", "timed", "other"]]]
        label = " ".join(relative.with_suffix("").parts)  # e2e xl bf16-compiled, flash sweep fp32-d128
        line = table_row(readme, label)
        assert line.endswith(" | ".join(f"{v:.1f}" for v in cells) + " |"), (label, line)


def test_section_9s_jobs_and_the_operator_ranges_cut_are_charged_as_their_files_say():
    """Section 9's table is each job's benchmark and cost-split files (``other`` with ``build`` and
    ``write``); job_costs.csv charges the jobs measured at 5cda776 their wall time, except the profile
    jobs: large as cuts/ranges measured it without per-operator ranges, xl and 2.7B as measured after
    that cut, and the others their last cost times the cut's without / with ratio, the README's (as
    the costs were before section 19's run, which measured small, medium and large again)."""
    readme = (SLICE / "README.md").read_text()
    lines = readme.splitlines()
    costs = costs_before(SECTION_19).set_index("job")
    run = SLICE / "head-5cda776"
    tsvs = sorted(run.glob("benchmarks/**/*.tsv"))
    assert len(tsvs) == 9
    for tsv in tsvs:
        relative = tsv.relative_to(run / "benchmarks")
        wall = benchmark_wall(tsv)
        split = cost_split(tsv)
        other = split[["build", "write", "other"]].sum()
        cells = [wall, *split[["start", "warmup", "capture", "timed", "profile"]], other]
        label = " ".join(relative.with_suffix("").parts)
        line = table_row(lines, label)
        assert line.endswith(" | ".join(f"{v:.1f}" for v in cells) + " |"), (label, line)
        if relative.parts[0] != "profile":
            assert_charged(costs, f"benchmarks/{relative}", "head-5cda776", until=SECTION_19)
    walls = {
        side: float((SLICE / "cuts/ranges" / side / "time.txt").read_text().split()[0]) for side in ("with", "without")
    }
    ratio = walls["without"] / walls["with"]
    assert f"({ratio:.3f})" in " ".join(readme.split())
    assert costs.loc["benchmarks/profile/large.tsv", "wall_s"] == walls["without"]
    for size in ("xl", "2.7B"):
        after = benchmark_wall(SLICE / f"head-dd2cc4a/benchmarks/profile/{size}.tsv")
        assert costs.loc[f"benchmarks/profile/{size}.tsv", "wall_s"] == after
    for size in ("small", "medium"):
        assert costs.loc[f"benchmarks/profile/{size}.tsv", "source"].endswith(f"x {ratio:.3f} (cuts/ranges)")
    text = " ".join(readme.split())
    phase = {
        side: pd.read_csv(SLICE / "cuts/ranges" / side / "benchmarks/profile/large.cost.csv").set_index("phase")
        for side in ("with", "without")
    }
    assert (
        f"**The job: {walls['with']:.1f} s with, {walls['without']:.1f} s without** ({ratio:.3f}), the `profile` "
        f"phase (nsys, writing its report, and `nsys stats`) {phase['with'].loc['profile', 'seconds']:.1f} s against "
        f"{phase['without'].loc['profile', 'seconds']:.1f}"
    ) in text
    before, after = (
        benchmark_wall(SLICE / run / "benchmarks/profile/2.7B.tsv") for run in ("head-5cda776", "head-dd2cc4a")
    )
    xl = costs.loc["benchmarks/profile/xl.tsv", "wall_s"]
    assert (
        f"**xl {xl:.1f} s, 2.7B {after:.1f} s** ({before:.1f} with the ranges at `5cda776`, {after / before:.3f};"
        in text
    )


def test_section_11s_warmup_jobs_are_charged_their_count_5_jobs_and_its_spreads_are_the_h100_rows():
    """The ten warm-up jobs (one process timing every count), charged their processes' count-5 jobs
    in section 11, are each charged as measured since (sections 12 and 13, then section 19); and
    section 11's within-process and across-process spreads are the H100 rows'."""
    for costs, runs in ((costs_before(SECTION_19), {*SECTION_12, SECTION_13}), (costs_before(), {SECTION_19})):
        warmup = costs[costs["job"].str.startswith("benchmarks/warmup/")]
        assert len(warmup) == 10 and set(warmup["source"]) <= runs
    rows = pd.read_csv(SLICE.parent / "h100/graph-capture/warmup.csv")
    text = " ".join((SLICE / "README.md").read_text().split())
    within, across = {}, {}
    for mode, group in rows.groupby("mode"):
        spreads = []
        for row in group[group["warmup_steps"] == 5].itertuples():
            steps = [*split_ms(row.warmup_times_ms), *split_ms(row.step_times_ms)]
            medians = [statistics.median(steps[n : n + 10]) for n in (0, 1, 2, 5)]
            spreads.append(max(medians) / min(medians))
        within[mode] = f"{min(spreads):.3f}-{max(spreads):.3f}"
        spread = group.groupby("warmup_steps")["median_ms"].agg(lambda s: s.max() / s.min())
        across[mode] = f"{spread.min():.3f}-{spread.max():.3f}"
    assert (
        f"within {within['forward']}× of each other in the forward and {within['forward_backward']}× in forward + "
        f"backward, process by process. Processes of one count differ by {across['forward']}× and "
        f"{across['forward_backward']}×"
    ) in text


def test_section_12s_jobs_are_charged_and_tabled_as_their_files_say():
    """Section 12: every job of its two runs is charged its benchmark's wall time, unless section 13
    measured it again; its text gives the 2.7B bf16-compiled one's estimate, that less the draws it
    would no longer make (its log's restores but the first, at the medians' difference of the restore
    log); the e2e jobs' table is their benchmark and cost-split files, and the README's ranges are the
    files'."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    readme = (SLICE / "README.md").read_text()
    text, lines = " ".join(readme.split()), readme_section("## 12. ", "## 13. ").splitlines()
    saved = draw_saving()
    log = (SLICE / "head-932eda2/logs/e2e/2.7B/bf16-compiled.log").read_text()
    restores = log.count("weights from the same seed are restored")
    assert restores == 4 and f"three draws at the medians' difference, {saved:.2f} s each" in text
    walls, exits = {}, {}
    for run in SECTION_12:
        for tsv in sorted((SLICE / run).glob("benchmarks/**/*.tsv")):
            job = "benchmarks/" + str(tsv.relative_to(SLICE / run / "benchmarks"))
            walls[job] = wall = benchmark_wall(tsv)
            split = cost_split(tsv)
            exits[job] = wall - split.sum()
            if job == "benchmarks/e2e/2.7B/bf16-compiled.tsv":
                assert (
                    f"less three draws at the medians' difference, {saved:.2f} s each ({wall - 3 * saved:.1f} s" in text
                )
            assert_charged(costs, job, run)
            if "/e2e/" in job:
                cells = [
                    *split[["start", "build", "warmup", "capture", "settle", "timed"]],
                    split[["write", "other"]].sum(),
                ]
                label = " ".join(Path(job).with_suffix("").parts[1:])
                line = table_row(lines, label)
                row = " | ".join(f"{v:.1f}" for v in [wall, *cells]) + f" | {wall - split.sum():.2f} |"
                assert line.endswith(row), (label, line)
    warmup = [w for job, w in walls.items() if "/warmup/" in job]
    assert len(walls) == 13 and len(warmup) == 9
    assert f"the nine measured took {min(warmup):.1f}-{max(warmup):.1f} s each" in text
    compiled = exits.pop("benchmarks/e2e/2.7B/bf16-compiled.tsv")
    rest = f"{min(exits.values()):.2f}-{max(exits.values()):.2f} s for twelve of these thirteen jobs"
    assert f"{rest}, {compiled:.2f} s for the compiled 2.7B job" in text


def test_section_12s_statements_are_its_rows_and_logs():
    """Section 12's sentences, from the files they cite: the fp32 jobs against their charges (the
    table's column), the warm-up jobs' charges before (their count-5 jobs), the holds in the e2e logs,
    the rows' statuses and CIs, and the compiled job's `build` phase split by its log."""
    readme = (SLICE / "README.md").read_text()
    text, lines = " ".join(readme.split()), readme_section("## 12. ", "## 13. ").splitlines()
    measured = {}
    for line in lines:
        if line.startswith("| e2e "):
            cells = line.strip("|").split(" | ")
            measured[cells[0].strip()] = float(cells[2]) / float(cells[1])
    fp32 = [ratio for label, ratio in measured.items() if "fp32" in label]
    assert len(fp32) == 3 and f"within 5% ({min(fp32):.3f}-{max(fp32):.3f} of them)" in text
    assert max(abs(r - 1) for r in fp32) <= 0.05
    assert f"costs 541.5 s, {measured['e2e 2.7B bf16-compiled']:.2f} times its charge" in text
    before = [
        benchmark_wall(SLICE.parent / "h100/graph-capture/benchmarks/warmup/small" / mode / f"w5-p{p}.tsv")
        for mode in ("forward", "forward_backward")
        for p in range(5)
    ]
    nine = before[:2] + before[3:]  # the tenth, forward's process 2, was not measured here
    warmups = [
        benchmark_wall(f) for run in SECTION_12 for f in sorted((SLICE / run).rglob("benchmarks/warmup/**/*.tsv"))
    ]
    projected = (sum(warmups) + before[2]) / 60  # the tenth still charged its count-5 job then
    assert f"count-5 jobs' {min(nine):.1f}-{max(nine):.1f} s (section 11)" in text
    assert f"falls from {sum(before) / 60:.1f} to {projected:.1f} GPU-minutes" in text
    logs = sorted((SLICE / "head-932eda2/logs/e2e").rglob("*.log")) + sorted(
        (SLICE / "head-d4346d8/logs/e2e").rglob("*.log")
    )
    held = [why for log in logs for _, why in holds(log)]
    ends = {why: held.count(why) for why in ("steady", "the most allowed", "far below the power limit")}
    assert len(logs) == 4 and sum(ends.values()) == len(held)
    assert (
        f"the four e2e jobs' logs hold {len(held)} holds, {ends['steady']} ended by the windows, "
        f"{ends['the most allowed']} at the 2 s most, one by the probe"
    ) in text and ends["far below the power limit"] == 1
    rows = {
        run: pd.concat(pd.read_csv(f) for f in sorted((SLICE / run / "rows/e2e").rglob("*.csv"))) for run in SECTION_12
    }
    fp32_rows, bf16_rows = rows["head-d4346d8"], rows["head-932eda2"]
    width = graphed_halfwidth
    assert len(fp32_rows) == 36 and (fp32_rows["status"] == "ok").all() and (width(fp32_rows) <= 0.01).all()
    ok = bf16_rows[bf16_rows["status"] == "ok"]
    wide = width(ok)[width(ok) > 0.01]
    assert (
        f"Of its {len(ok)} `ok` rows, {len(ok) - len(wide)} have their graphed CI within 1%; the other "
        f"{['', 'one', 'two', 'three', 'four', 'five', 'six'][len(wide)]} lie at "
        f"{100 * wide.min():.2f}-{100 * wide.max():.2f}%"
    ) in text
    log = (SLICE / "head-932eda2/logs/e2e/2.7B/bf16-compiled.log").read_text().splitlines()
    stamp = lambda line: pd.Timestamp(line[:23].replace(",", "."))  # noqa: E731
    first = stamp(next(x for x in log if "built 2.7B" in x)) - stamp(next(x for x in log if "phase build" in x))
    build = cost_split(SLICE / "head-932eda2/benchmarks/e2e/2.7B/bf16-compiled.tsv")["build"]
    draw = (build - first.total_seconds()) / 4
    assert f"`build` (the phase of drawing a model) is {build:.1f} s" in text
    assert f"the model's own build took {first.total_seconds():.1f} s" in text
    assert f"the four draws about {draw:.1f} s each" in text


def test_section_13s_jobs_are_charged_and_tabled_as_their_files_say():
    """Section 13: each job of its run is charged its benchmark's wall time; its table's row is its
    charge before (the cost it replaced, from that cost's own files), its benchmark and cost-split
    files; and the ranges its text gives are the table's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    section = readme_section("## 13. ", "## What is next")
    text, lines = " ".join(section.split()), section.splitlines()
    saved = draw_saving()
    h100, run = SLICE.parent / "h100", SLICE / SECTION_13
    gc = [float((SLICE / f"cuts/gc/ladder/{side}/job.log").read_text().split()[-3]) for side in ("4-old", "3-new")]

    def before(job: str) -> float:
        """What job_costs.py charged the job before this run: section 12's estimate, small's timed job
        at 1024 as measured at 8f96bdc, the other ladder jobs as measured at ab1a14a (the timed ones
        less the gc cut's saving), the warm-up job its count-5 job."""
        if job == "benchmarks/e2e/2.7B/bf16-compiled.tsv":
            return benchmark_wall(SLICE / "head-932eda2" / job) - 3 * saved
        if job == "benchmarks/ladder/small/ctx1024-timed.tsv":
            return benchmark_wall(SLICE / "head-8f96bdc" / job)
        if job.startswith("benchmarks/ladder/"):
            name = "ladder-" + "-".join(Path(job).with_suffix("").parts[2:]) + ".tsv"
            return benchmark_wall(h100 / "ladder-grid-ab1a14a/benchmarks" / name) - ("-timed" in job) * (gc[0] - gc[1])
        return benchmark_wall(h100 / "graph-capture/benchmarks" / job.replace("/p", "/w5-p").split("/", 1)[1])

    ratios = {"2.7B": [], "small": []}
    for tsv in sorted(run.glob("benchmarks/**/*.tsv")):
        job = "benchmarks/" + str(tsv.relative_to(run / "benchmarks"))
        wall, split = benchmark_wall(tsv), cost_split(tsv)
        assert_charged(costs, job, SECTION_13)
        cells = [before(job), wall, *split[["start", "build", "warmup", "capture", "settle", "timed"]]]
        row = (
            " | ".join(f"{v:.1f}" for v in [*cells, split[["write", "other"]].sum()]) + f" | {wall - split.sum():.2f} |"
        )
        line = table_row(lines, " ".join(Path(job).with_suffix("").parts[1:]))
        assert line.endswith(row), (job, line)
        if "/ladder/" in job:
            ratios[Path(job).parts[2]].append(wall / before(job))
    assert len(list(run.glob("benchmarks/**/*.tsv"))) == 8
    (big, small) = (f"{min(r):.2f}-{max(r):.2f}" for r in ratios.values())
    assert f"Each now costs {big} of its charge at 2.7B and {small} at small" in text


def test_section_13s_statements_are_its_rows_and_logs():
    """Section 13's sentences, from its rows and logs: the rate in the rows, no restore, every row
    `ok`, the CIs, naive attention's train step against SDPA's, the medians against section 12's rows
    of the same job, and the ladder's holds by how they ended."""
    section = readme_section("## 13. ", "## What is next")
    text = " ".join(section.split())
    run = SLICE / SECTION_13
    e2e = pd.read_csv(run / "rows/e2e/2.7B/bf16-compiled.csv")
    assert set(e2e["lr"]) == {0.032 / 2560} and f"{0.032 / 2560:.3g} at 2.7B" in text
    assert "restored" not in (run / "logs/e2e/2.7B/bf16-compiled.log").read_text()
    width = graphed_halfwidth
    wide = width(e2e)[width(e2e) > 0.01]
    assert len(e2e) == 36 and (e2e["status"] == "ok").all() and "All 36 rows are `ok`" in text
    assert f"{36 - len(wide)} have their graphed CI within 1%" in text
    assert f"the other nine lie at {100 * wide.min():.2f}-{100 * wide.max():.2f}%" in text and len(wide) == 9
    train = e2e[e2e["mode"] == "train_step"].set_index(["attention", "context_length"])["graphed_median_ms"]
    assert (
        f"{train['naive', 128]:.2f} and {train['naive', 256]:.2f} ms replayed, against SDPA's "
        f"{train['sdpa', 128]:.2f} and {train['sdpa', 256]:.2f}"
    ) in text
    keys = ["context_length", "mode", "attention"]
    old = pd.read_csv(SLICE / "head-932eda2/rows/e2e/2.7B/bf16-compiled.csv")
    pairs = e2e.merge(old[old["status"] == "ok"], on=keys, suffixes=("", "_old"))
    ratio = pairs["graphed_median_ms"] / pairs["graphed_median_ms_old"]
    short, long = pairs["context_length"] <= 256, pairs["context_length"] >= 512
    assert (
        f"the {short.sum()} pairs of graphed medians lie at {ratio[short].min():.3f}-{ratio[short].max():.3f}" in text
    )
    assert (
        f"this run's {long.sum()} are {100 * (ratio[long].min() - 1):.1f}-{100 * (ratio[long].max() - 1):.1f}% slower"
        in text
    )
    drew = [
        f"{pairs.loc[long, f'graphed_power_w{s}'].min():.0f}-{pairs.loc[long, f'graphed_power_w{s}'].max():.0f} W at "
        f"{pairs.loc[long, f'graphed_sm_clock_mhz{s}'].min():g}-{pairs.loc[long, f'graphed_sm_clock_mhz{s}'].max():g}"
        for s in ("", "_old")
    ]
    assert f"replays drew {drew[0]} MHz, section 12's {drew[1]} MHz" in text
    ladder = pd.concat(pd.read_csv(f) for f in sorted(run.glob("rows/ladder/*/*.csv")) if "kernels" not in f.name)
    timed = pd.concat(pd.read_csv(f) for f in sorted(run.glob("rows/ladder/*/*-timed.csv")))
    assert len(ladder) == 72 and (ladder["status"] == "ok").all()
    within, widest = int((width(timed) <= 0.01).sum()), width(timed).max()
    assert len(timed) == 36 and within == 35
    assert (
        f"of the 36 in the timed jobs, {within} have their graphed CI within 1%, the other at {100 * widest:.2f}%"
        in text
    )
    held = {}
    for log in sorted(run.glob("logs/ladder/*/*-timed.log")):
        ended = [why for _, why in holds(log)]
        held[log.parent.name, log.stem] = (
            sum(seconds for seconds, _ in holds(log)),
            len(ended),
            ended.count("far below the power limit"),
            ended.count("the most allowed"),
        )
    (s512, n512, p512, _), (s1024, n1024, p1024, _) = held["small", "ctx512-timed"], held["small", "ctx1024-timed"]
    assert (
        f"{s512:.1f} s ({n512} holds, {p512} ended by the probe) at 512 and {s1024:.1f} s ({n1024} holds, "
        f"{p1024} by the probe) at 1024"
    ) in text
    seconds, n, probe, most = held["2.7B", "ctx512-timed"]
    assert probe == 0 and f"{n} holds, {seconds:.1f} s, {most} at the most allowed" in text
    before_probe = [
        sum(seconds for seconds, _ in holds(log))
        for log in [
            *sorted(SLICE.glob("cuts/gc/ladder/*/*.log")),
            SLICE / "head-8f96bdc/logs/ladder/small/ctx1024-timed.log",
        ]
    ]
    assert (
        f"before the probe they held {min(before_probe[:-1]):.1f}-{max(before_probe[:-1]):.1f} s at 512 (`cuts/gc/`, "
        f"section 4) and {before_probe[-1]:.1f} s at 1024"
    ) in text
    lower = pairs["graphed_sm_clock_mhz"] < pairs["graphed_sm_clock_mhz_old"]
    drop = pairs["graphed_sm_clock_mhz_old"] - pairs["graphed_sm_clock_mhz"]
    assert (
        f"lower in {lower[short].sum()} of the {short.sum()} pairs at 128 and 256 too (by {drop[short].median():g} "
        f"MHz at the median), and in {lower[long].sum()} of the {long.sum()} at 512 and 1024 (by "
        f"{drop[long].median():g} MHz)"
    ) in text
    walls = {
        name: benchmark_wall(SLICE / run / "benchmarks/e2e/2.7B/bf16-compiled.tsv")
        for name, run in (("now", SECTION_13), ("then", "head-932eda2"))
    }
    assert_charged(
        pd.read_csv(SLICE / "job_costs.csv").set_index("job"), "benchmarks/e2e/2.7B/bf16-compiled.tsv", SECTION_13
    )
    assert (
        f"took {walls['now']:.1f} s**, where section 12's run took {walls['then']:.1f} s and the projection charged "
        f"it {table_row(section.splitlines(), 'e2e 2.7B bf16-compiled').split(' | ')[1]} s, an estimate"
    ) in text
    warmup = SLICE / SECTION_13 / "benchmarks/warmup/small/forward/p2.tsv"
    five = SLICE.parent / "h100/graph-capture/benchmarks/warmup/small/forward/w5-p2.tsv"
    assert (
        f"took {benchmark_wall(warmup):.1f} s, where it was charged its count-5 job's {benchmark_wall(five):.1f} s"
        in text
    )
    # the projection when section 13 was written; section 14's run changed it (its test checks the chain)
    assert "**Projection: 178 GPU-minutes, 46 minutes on four GPUs** (269 and 71 with `wide.yaml`; it was 184" in text


def test_section_14s_jobs_are_charged_and_tabled_as_their_files_say():
    """Section 14: each job of its run is charged its benchmark's wall time; its table's row is its
    charge before (the run that measured it last before), its benchmark and cost-split files; the
    text's totals, ranges and counts are the files'; and its projection is the committed one, after
    section 13's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    section = readme_section("## 14. ", "## 15. ")
    text, lines = " ".join(section.split()), section.splitlines()
    run = SLICE / SECTION_14

    def before(job: str) -> float:
        """What job_costs.py charged the job before this run: the last earlier run that measured it."""
        if job == "benchmarks/ddp/train-n2-b16.tsv":
            return benchmark_wall(SLICE.parent / "h100/memory-ddp/benchmarks/ddp/train-b16.tsv")
        return earlier_wall(job, SECTION_14)

    walls, charged = cost_table(SECTION_14, lines, costs, before)
    assert len(walls) == 12
    sweep = [job for job in walls if "/flash/sweep/" in job]
    assert len(sweep) == 8
    ratio = {job: walls[job] / charged[job] for job in sweep}
    d128 = ratio.pop("benchmarks/flash/sweep/fp32-d128.tsv")
    assert (
        f"took {sum(walls[j] for j in sweep):.1f} s, where they were charged {sum(charged[j] for j in sweep):.1f} s**: "
        f"{min(ratio.values()):.2f}-{max(ratio.values()):.2f} of their charges, and {d128:.2f} at fp32, d = 128"
    ) in text
    old = SLICE / "head-5cda776"
    pytorch = [
        sum(float(s) for s in re.findall(r"trial +ours_pytorch .*: +([\d.]+) s,", log.read_text()))
        for log in sorted(old.glob("logs/flash/sweep/*.log"))
    ]
    saved = [before(job) - walls[job] for job in sweep if (old / job).exists()]
    assert len(pytorch) == len(saved) == 4
    assert f"cost {min(saved):.1f}-{max(saved):.1f} s less, of which its trial passes were" in text
    assert f"its trial passes alone took {min(pytorch):.1f}-{max(pytorch):.1f} s of each of the four" in text
    rows = pd.concat(pd.read_csv(f) for f in sorted(run.glob("rows/flash/sweep/*.csv")))
    assert "ours_pytorch" not in set(rows["implementation"]) and set(rows["commit"]) == {"6e3f83292a58"}
    graphed = rows[rows["graphed_median_ms"].notna()]
    skipped = (rows["status"] == "skipped").sum()
    assert set(rows["status"]) == {"ok", "skipped"}
    assert f"All {len(rows)} rows are `ok` or `skipped` ({skipped}:" in text
    within = (graphed_halfwidth(graphed) <= 0.01).sum()
    assert f"{within} of the {len(graphed)} graphed CIs lie within 1%" in text
    share = [cost_split(run / job)["warmup"] / walls[job] for job in sweep]
    assert f"warm-up is {100 * min(share):.0f}-{max(share):.0%} of each" in text
    log = (run / "logs/flash/sweep/fp32-d128.log").read_text()
    trials = re.findall(r"trial +(\w+) +(\w+) seq +(\d+): +([\d.]+) s", log)
    ours = {(p, int(n)): float(t) for name, p, n, t in trials if name == "ours_triton"}
    by_name = {name: round(sum(float(t) for n, _, _, t in trials if n == name), 1) for name, *_ in trials}
    assert (
        f"our kernels' trial passes took {by_name['ours_triton']:.1f} s: the backward's at seq 128 "
        f"{ours['backward', 128]:.1f} s"
    ) in text
    assert f"and at 65536 {ours['backward', 65536]:.1f} s" in text
    assert f"compiled naive attention's took {by_name['naive_compiled']:.1f} s" in text
    checks, earlier = (cost_split(r / "benchmarks/ladder/small/ctx512.tsv") for r in (run, SLICE / SECTION_13))
    assert (
        f"put {checks['check']:.1f} s in `check` (its loss checks) and {checks['profile']:.1f} s in `profile` (its "
        f"kernel profiles), where `head-d3ed14d/`'s job had {earlier[['write', 'other']].sum():.1f} s in `other`; "
        f"{checks[['write', 'other']].sum():.1f} s are left there"
    ) in text
    ddp = pd.read_csv(run / "rows/ddp/train-n2-b16.csv")
    compared = ddp[ddp["variant"] != "torch_ddp"]
    more = compared[compared["n_steps"] > 20].sort_values("variant", key=lambda v: v.map(grid.DDP_VARIANTS.index))
    assert (set(ddp["status"]) == {"ok"}) and f"All {len(ddp)} rows are `ok`" in text
    assert list(more["variant"]) == ["flat", "individual", "bucketed-10"]
    assert f"({', '.join(map(str, more['n_steps'].iloc[:-1]))} and {more['n_steps'].iloc[-1]})" in text
    resolved = compared["vs_anchor_resolved"].astype(bool)
    assert f"{resolved.sum()} of the {len(compared)} ratios to torch DDP are resolved" in text
    # the projection then: the committed costs before section 16's jobs, scheduled as before section 15
    full, wide = (
        summary(project(pd.read_csv(SLICE / name), costs_before(SECTION_16)), 4).set_index("study")
        for name in ("jobs.csv", "jobs-wide.csv")
    )
    walls = {
        k: longest_first_minutes(name, 4, SECTION_16) for k, name in (("full", "jobs.csv"), ("wide", "jobs-wide.csv"))
    }
    assert (
        f"**Projection: {full.loc['all', 'gpu_min']:.0f} GPU-minutes, {walls['full']:.0f} minutes on "
        f"four GPUs** ({wide.loc['all', 'gpu_min']:.0f} and {walls['wide']:.0f} with `wide.yaml`, a "
        "lower bound; the full grid's was 178 and 46)"
    ) in text
    thirteen = " ".join(readme_section("## 13. ", "## 14. ").split())
    assert "**Projection: 178 GPU-minutes, 46 minutes on four GPUs**" in thirteen
    for study, then in (("flash", 30.5), ("ddp", 29.2), ("ladder", 28.5)):  # section 3's table before this run
        assert f"{then} → {full.loc[study, 'gpu_min']:.1f}" in text, study
    idle = 4 * walls["full"] - full.loc["all", "gpu_min"]
    before = 4 * 46.108250264082336 - 177.60969739848184  # section 13's projection.csv, "all"
    assert f"moves from 46.1 to {walls['full']:.1f} minutes" in text
    assert f"{before:.1f} GPU-minutes idle before, {idle:.1f} now" in text


def test_section_15s_order_and_its_projections_are_the_committed_files():
    """Section 15: the old order's wall times, scheduled as GPUs free, against the projections in the
    new order, both from the committed costs as they were then (before section 16's jobs); the even
    spread; and section 14's wall time under the schedule before."""
    text = " ".join(readme_section("## 15. ", "## 16. ").split())
    machines = {
        "": ("jobs.csv", 4),
        "-gpus2": ("jobs.csv", 2),
        "-gpus8": ("jobs.csv", 8),
        "-wide": ("jobs-wide.csv", 4),
    }
    after = {
        name: summary(project(pd.read_csv(SLICE / jobs_name), costs_before(SECTION_16)), n_gpus)
        .set_index("study")
        .loc["all"]
        for name, (jobs_name, n_gpus) in machines.items()
    }

    def old_order(jobs_name: str, n_gpus: int) -> float:
        projected = committed_jobs(jobs_name, n_gpus, SECTION_16)
        return makespan(list(projected["wall_s"]), list(projected["gpus"]), n_gpus, order=seconds) / 60

    before = {
        "": old_order("jobs.csv", 4),
        "-gpus2": old_order("jobs.csv", 2),
        "-gpus8": old_order("jobs.csv", 8),
        "-wide": old_order("jobs-wide.csv", 4),
    }
    arrows = {name: f"{before[name]:.1f} → {after[name]['wall_min']:.1f}" for name in after}
    assert f"the full grid on four GPUs {arrows['']} minutes, against {after['']['gpu_min'] / 4:.1f} for" in text
    assert f"on eight {arrows['-gpus8']}; on two {arrows['-gpus2']}; with `wide.yaml` on four {arrows['-wide']}" in text
    assert all(after[name]["wall_min"] <= before[name] for name in after)
    assert after[""]["wall_min"] < before[""] and after["-gpus8"]["wall_min"] < before["-gpus8"]
    assert f"({longest_first_minutes('jobs.csv', 4, SECTION_16):.1f} minutes on four GPUs in section 14)" in text


def warmup_blocks(log: Path) -> list[float]:
    """A job log's warm-up blocks: seconds from each "phase warmup" line to the next line."""
    times = [
        (pd.Timestamp(stamp.replace(",", ".")), what)
        for stamp, what in re.findall(r"^(\S+ \S+) \w+ \S+: (.*)$", log.read_text(), re.M)
    ]
    return [(b - a).total_seconds() for (a, what), (b, _) in zip(times, times[1:]) if what == "phase warmup"]


def trial_seconds(log: Path, name: str) -> list[tuple[str, int, float]]:
    """A flash job log's trial passes of implementation ``name``: (pass, seq, seconds) in order."""
    found = re.findall(rf"trial +{name} +(\w+) seq +(\d+): +([\d.]+) s,", log.read_text())
    return [(p, int(n), float(t)) for p, n, t in found]


def sweep_ratios(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Two runs' flash sweep rows side by side (suffixes _a, _b) where both were replayed: each row's
    graphed median of b over a's (``r``), and whether their 95% CIs are apart (``apart``)."""
    keys = ["implementation", "pass", "seq", "d", "dtype"]
    both = a.merge(b, on=keys, suffixes=("_a", "_b")).dropna(subset=["graphed_median_ms_a", "graphed_median_ms_b"])
    apart = (both["graphed_ci95_high_ms_b"] < both["graphed_ci95_low_ms_a"]) | (
        both["graphed_ci95_low_ms_b"] > both["graphed_ci95_high_ms_a"]
    )
    return both.assign(r=both["graphed_median_ms_b"] / both["graphed_median_ms_a"], apart=apart)


def assert_projection(text: str, full, wide, then, section: str, studies) -> None:
    """A section's bold projection sentence: the totals of ``full`` and ``wide`` (summaries by study),
    against ``then``'s as the earlier ``section`` left them, and each of ``studies`` as then → now."""
    total, total_wide, total_then = full.loc["all"], wide.loc["all"], then.loc["all"]
    assert (
        f"**Projection: {total['gpu_min']:.0f} GPU-minutes, {total['wall_min']:.1f} minutes on four GPUs** "
        f"({total_wide['gpu_min']:.0f} and {total_wide['wall_min']:.1f} with `wide.yaml`, a lower bound; section "
        f"{section}'s were {total_then['gpu_min']:.0f} and {total_then['wall_min']:.1f})"
    ) in text
    for study in studies:
        assert f"{study} {then.loc[study, 'gpu_min']:.1f} → {full.loc[study, 'gpu_min']:.1f}" in text, study


def test_section_16s_jobs_and_statements_are_its_files():
    """Section 16: each job of its run is charged its benchmark's wall time and tabled with its charge
    before, its benchmark and its cost split; the first calls are the script's log; the sweep's,
    e2e's and the medians' statements are the runs' rows and logs; and the projection is the
    committed one, against section 15's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    section = readme_section("## 16. ", "## What is next")
    text, lines = " ".join(section.split()), section.splitlines()
    run, old = SLICE / SECTION_16, SLICE / SECTION_14
    walls, _ = cost_table(SECTION_16, lines, costs, lambda job: earlier_wall(job, SECTION_16))
    assert len(walls) == 12
    sweep = sorted(job for job in walls if "/flash/sweep/" in job)
    assert len(sweep) == 8 and all((old / job).exists() for job in sweep)
    assert (
        f"eight jobs took {sum(walls[j] for j in sweep):.1f} s, where section 14's run of the same jobs took "
        f"{sum(benchmark_wall(old / j) for j in sweep):.1f} s"
    ) in text

    log = (ROOT / "notes/logs/2026-11-30-parallel_compile-7ae2b01-h200x2.txt").read_text()
    second = [json.loads(x) for x in log.split("# run 1")[0].splitlines() if x[:1] == "{"]
    first_s = {(r["dtype"], r["d"], r["compile"]): r["first_s"] for r in second}
    for dtype, d in (("bf16", 64), ("bf16", 80), ("fp32", 128)):
        arrow = f"{first_s[dtype, d, 'serial']:.1f} → {first_s[dtype, d, 'threads']:.1f} s ({dtype}, d = {d})"
        assert arrow in text, arrow

    logs = {side: sorted((SLICE / side).glob("logs/flash/sweep/*.log")) for side in (SECTION_14, SECTION_16)}
    ours = {side: [trial_seconds(f, "ours_triton") for f in files] for side, files in logs.items()}
    total = {side: sum(t for trials in ours[side] for _, _, t in trials) for side in ours}
    assert f"took {total[SECTION_16]:.1f} s against {total[SECTION_14]:.1f} s there" in text
    dropped = sum(benchmark_wall(old / j) for j in sweep) - sum(walls[j] for j in sweep)
    assert f"(the jobs' logs): {total[SECTION_14] - total[SECTION_16]:.1f} s of the {dropped:.1f} s" in text
    naive = {
        side: sum(t for f in files for _, _, t in trial_seconds(f, "naive_compiled")) for side, files in logs.items()
    }
    starts = {side: sum(cost_split(SLICE / side / j)["start"] for j in sweep) for side in logs}
    assert (
        f"(compiled naive attention's trial passes {naive[SECTION_16]:.1f} against {naive[SECTION_14]:.1f} s, "
        f"the jobs' `start` {starts[SECTION_16]:.1f} against {starts[SECTION_14]:.1f} s)"
    ) in text
    board, board_before = (
        cost_split(r / "benchmarks/flash/leaderboard.tsv") for r in (run, SLICE.parent / "flash-sweep-rounds")
    )
    job = "benchmarks/flash/leaderboard.tsv"
    assert (
        f"The leaderboard's {earlier_wall(job, SECTION_16) - walls[job]:.1f} s less is its `start` "
        f"({board['start']:.1f} against {board_before['start']:.1f} s in `../flash-sweep-rounds/`); its warm-up rose "
        f"from {board_before['warmup']:.1f} to {board['warmup']:.1f} s"
    ) in text
    first_bwd = {
        side: {
            f.stem: next(t for p, n, t in trials if p == "backward" and n == 128)
            for f, trials in zip(logs[side], ours[side])
        }
        for side in ours
    }
    bf16 = {side: [t for stem, t in first_bwd[side].items() if stem.startswith("bf16")] for side in ours}
    assert (
        f"seq 128 took {min(bf16[SECTION_16]):.1f}-{max(bf16[SECTION_16]):.1f} s at bf16 against "
        f"{min(bf16[SECTION_14]):.1f}-{max(bf16[SECTION_14]):.1f} s, and {first_bwd[SECTION_16]['fp32-d128']:.1f} s "
        f"at fp32, d = 128 against {first_bwd[SECTION_14]['fp32-d128']:.1f} s"
    ) in text
    long = next(
        t
        for p, n, t in ours[SECTION_16][[f.stem for f in logs[SECTION_16]].index("fp32-d128")]
        if p == "backward" and n == 65536
    )
    assert f"at seq 65536 still took {long:.1f} s" in text

    def sweep_rows(side: str) -> pd.DataFrame:
        return pd.concat(pd.read_csv(f) for f in sorted((SLICE / side).glob("rows/flash/sweep/*.csv")))

    rows = sweep_rows(SECTION_16)
    assert set(rows["status"]) == {"ok", "skipped"} and set(rows["commit"]) == {"7ae2b01b0975"}
    graphed = rows[rows["graphed_median_ms"].notna()]
    within = (graphed_halfwidth(graphed) <= 0.01).sum()
    earlier = sweep_rows(SECTION_14)
    earlier_graphed = earlier[earlier["graphed_median_ms"].notna()]
    assert (within, len(graphed)) == ((graphed_halfwidth(earlier_graphed) <= 0.01).sum(), len(earlier_graphed))
    assert (
        f"All {len(rows)} rows are `ok` or `skipped`; {within} of the {len(graphed)} graphed CIs lie within 1%" in text
    )

    e2e = "benchmarks/e2e/2.7B/bf16-eager.tsv"
    e2e_before = charged_run(e2e, "head-507f3e6")
    assert e2e_before == SECTION_16 and (SLICE / "head-507f3e6" / e2e).exists()
    split, split_before = cost_split(run / e2e), cost_split(SLICE / "head-507f3e6" / e2e)
    assert f"took {walls[e2e]:.1f} s against {benchmark_wall(SLICE / 'head-507f3e6' / e2e):.1f} s" in text
    assert f"warm-up {split['warmup']:.1f} against {split_before['warmup']:.1f} s" in text
    blocks = [max(warmup_blocks(r / "logs/e2e/2.7B/bf16-eager.log")) for r in (run, SLICE / "head-507f3e6")]
    assert f"took {blocks[0]:.1f} s against {blocks[1]:.1f} s (the jobs' logs)" in text
    assert (
        f"its holds {split['settle']:.1f} against {split_before['settle']:.1f} s, its timed steps "
        f"{split['timed']:.1f} against {split_before['timed']:.1f} s"
    ) in text
    assert f"charges ({walls['benchmarks/e2e/small/bf16-compiled.tsv']:.1f} and" in text
    e2e_rows = pd.concat(pd.read_csv(f) for f in sorted(run.glob("rows/e2e/*/*.csv")))
    e2e_within = (graphed_halfwidth(e2e_rows) <= 0.01).sum()
    assert f"{e2e_within} of the three e2e jobs' {e2e_rows['graphed_median_ms'].notna().sum()} graphed CIs" in text

    now, then = sweep_ratios(earlier, rows), sweep_ratios(sweep_rows("head-5cda776"), earlier)
    others = now[now["implementation"] != "ours_triton"]["r"]
    assert f"within {others.min():.2f}-{others.max():.2f} of theirs" in text
    ours = now[now["implementation"] == "ours_triton"]
    far = ours[(ours["r"] - 1).abs() > 0.05]
    assert far["apart"].all()
    assert (
        f"Ours lie within {ours['r'].min():.2f}-{ours['r'].max():.2f}: {len(far)} of {len(ours)} more than 5% apart, "
        f"every one resolved ({(far['r'] < 1).sum()} faster, {(far['r'] > 1).sum()} slower)"
    ) in text
    subset = ours[ours[["d", "dtype"]].apply(tuple, axis=1).isin(set(zip(then["d"], then["dtype"])))]
    then = then[then["implementation"] == "ours_triton"]["r"]
    assert (
        f"{((subset['r'] - 1).abs() > 0.05).sum()} of {len(subset)} are more than 5% apart, where `head-5cda776/` "
        f"against `head-6e3f832/`, both without the change, gave {((then - 1).abs() > 0.05).sum()} of {len(then)} "
        f"({then.min():.2f}-{then.max():.2f})"
    ) in text

    # the projection then: the committed costs before section 17's jobs
    full, wide, *on = (
        summary(project(pd.read_csv(SLICE / name), costs_before(SECTION_17)), gpus).set_index("study")
        for name, gpus in (("jobs.csv", 4), ("jobs-wide.csv", 4), ("jobs.csv", 1), ("jobs.csv", 2), ("jobs.csv", 8))
    )
    then = summary(project(pd.read_csv(SLICE / "jobs.csv"), costs_before(SECTION_16)), 4).set_index("study")
    assert_projection(text, full, wide, then, "15", ("flash", "e2e"))
    on = {g: frame.loc["all", "wall_min"] for g, frame in zip((1, 2, 8), on)}
    assert f"On one GPU {on[1]:.0f} minutes, on two {on[2]:.1f}, on eight {on[8]:.1f}" in text


def test_section_17s_jobs_and_statements_are_its_files():
    """Section 17: each job of its run is charged its benchmark's wall time and tabled with its charge
    before, its benchmark and its cost split; the statements on warm-up, holds, CIs and medians are
    the runs' rows and logs; and the projection is the committed one, against section 16's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    section = readme_section("## 17. ", "## 18. ")
    text, lines = " ".join(section.split()), section.splitlines()
    run = SLICE / SECTION_17
    walls, charged = cost_table(SECTION_17, lines, costs, lambda job: earlier_wall(job, SECTION_17))
    assert len(walls) == 4 and set(pd.concat(pd.read_csv(f) for f in run.glob("rows/**/*.csv"))["commit"]) == {
        "70a402643380"
    }
    befores = {
        "xl/bf16-compiled": "head-507f3e6",
        "2.7B/bf16-compiled": SECTION_13,
        "small/bf16-eager": "cuts/probe/with",
    }
    for name, before in befores.items():
        job, log = f"benchmarks/e2e/{name}.tsv", f"logs/e2e/{name}.log"
        assert charged[job] == benchmark_wall(SLICE / before / job)
        assert f"took {walls[job]:.1f} s against {charged[job]:.1f} s" in text, name
        now, then = cost_split(run / job), cost_split(SLICE / before / job)
        ends = {
            side: Counter(why.split(" (")[0] for _, why in holds(r / log))
            for side, r in (("now", run), ("then", SLICE / before))
        }
        if name == "small/bf16-eager":
            assert f"its holds {now['settle']:.1f} against {then['settle']:.1f} s (its warm-up" in text
            assert f"{now['warmup']:.1f} against {then['warmup']:.1f} s, its other {now['other']:.1f} against" in text
            probed = ends["then"]["far below the power limit"]
            assert probed == sum(ends["then"].values()) == 72
            assert (
                f"probe ended all {probed} holds; here it ended {ends['now']['far below the power limit']} of "
                f"{sum(ends['now'].values())}" in text
            )
            found = re.findall(
                r"held \d+ steps for ([\d.]+) s: steady \(probe: \d+ samples, up to (\d+)%", (run / log).read_text()
            )
            seconds, read = [float(s) for s, _ in found], [int(r) for _, r in found]
            assert f"Of the other {ends['now']['steady']}, {len(read)} ran their windows" in text
            assert f"({min(seconds):.2f}-{max(seconds):.2f} s) after the probe read {min(read)}-{max(read)}%" in text
            above = [r for r in read if r > 80]
            assert (
                f"{sum(r < 80 for r in read)} of the {len(read)} read under 80%" in text
                and f"{read.count(80)} read 80% (as rounded) and {len(above)} read {min(above)}-{max(above)}%" in text
            )
            continue
        blocks = [max(warmup_blocks(r / log)) for r in (run, SLICE / before)]
        assert f"warm-up {now['warmup']:.1f} against {then['warmup']:.1f} s" in text, name
        assert f"{blocks[0]:.1f} s against {blocks[1]:.1f} s" in text, name
        assert f"holds {now['settle']:.1f} against {then['settle']:.1f} s" in text, name
        assert f"timed steps {now['timed']:.1f} against {then['timed']:.1f} s" in text, name
        assert f"{ends['now']['the most allowed']} at the 2 s allowed" in text, name
        assert f"where {ends['then']['the most allowed']} of {sum(ends['then'].values())} ran to it before" in text
    sweep = "benchmarks/flash/sweep/bf16-d64.tsv"
    assert f"took {walls[sweep]:.1f} s against {charged[sweep]:.1f} s" in text
    warmups = [cost_split(r / sweep)["warmup"] for r in (run, SLICE / SECTION_16)]
    assert f"its warm-up {warmups[0]:.1f} against {warmups[1]:.1f} s" in text

    keys = {"e2e": ["context_length", "mode", "attention"], "flash": ["implementation", "pass", "seq"]}
    for label, name in (
        ("2.7B", "e2e/2.7B/bf16-compiled"),
        ("xl", "e2e/xl/bf16-compiled"),
        ("small", "e2e/small/bf16-eager"),
        ("sweep", "flash/sweep/bf16-d64"),
    ):
        rows = pd.read_csv(run / f"rows/{name}.csv")
        graphed = rows[rows["graphed_median_ms"].notna()]
        assert f"{(graphed_halfwidth(graphed) <= 0.01).sum()} of {len(graphed)} ({label})" in text, label
        job = f"benchmarks/{name}.tsv"
        earlier = [r for r in RUNS[: RUNS.index(SECTION_17)] if (SLICE / r / job).exists()][-1]
        both = graphed.merge(pd.read_csv(SLICE / earlier / f"rows/{name}.csv"), on=keys[name.split("/")[0]])
        ratio = both["graphed_median_ms_x"] / both["graphed_median_ms_y"]
        assert f"{ratio.min():.2f}-{ratio.max():.2f} ({label})" in text, label
    ours = pd.read_csv(run / "rows/flash/sweep/bf16-d64.csv").query("implementation == 'ours_triton'")
    portable = ours["attention_kernel"].str.contains("triton")
    assert ours.loc[portable, "tiles"].notna().all() and ours.loc[~portable, "tiles"].isna().all()
    assert f"(`tiles`; {portable.sum()} of {len(ours)} rows:" in text

    full, wide = (
        summary(project(pd.read_csv(SLICE / name), costs_before(SECTION_18)), 4).set_index("study")
        for name in ("jobs.csv", "jobs-wide.csv")
    )
    then = summary(project(pd.read_csv(SLICE / "jobs.csv"), costs_before(SECTION_17)), 4).set_index("study")
    assert_projection(text, full, wide, then, "16", ("e2e", "flash"))


def test_section_18s_jobs_and_statements_are_its_files():
    """Section 18: each job of its run is charged its benchmark's wall time and tabled with its charge
    before, its benchmark and its cost split; the trial passes, the medians against the runs before
    and the CIs are its rows and logs; and the projection is the committed one, against section 17's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    section = readme_section("## 18. ", "## 19. ")
    text, lines = " ".join(section.split()), section.splitlines()
    run = SLICE / SECTION_18
    walls, charged = cost_table(SECTION_18, lines, costs, lambda job: earlier_wall(job, SECTION_18))
    sweep = sorted(job for job in walls if "/flash/sweep/" in job)
    assert len(walls) == 10 and len(sweep) == 8
    rows = {f: pd.read_csv(f) for f in sorted(run.glob("rows/**/*.csv"))}
    assert {c for frame in rows.values() for c in frame["commit"]} == {"eeba84134ede"}
    assert (
        f"eight sweep jobs took {sum(walls[j] for j in sweep):.1f} s, where they were charged "
        f"{sum(charged[j] for j in sweep):.1f} s" in text
    )

    def before(job: str) -> str:  # the run whose cost of the job was charged before this one
        return [r for r in RUNS[: RUNS.index(SECTION_18)] if (SLICE / r / job).exists()][-1]

    def trials(base, job: str, name: str) -> float:  # the job's trial passes of ``name``, in seconds
        log = base / job.replace("benchmarks/", "logs/").replace(".tsv", ".log")
        return sum(t for *_, t in trial_seconds(log, name))

    compiled, ours = (
        {"now": [trials(run, j, name) for j in sweep], "then": [trials(SLICE / before(j), j, name) for j in sweep]}
        for name in ("naive_compiled", "ours_triton")
    )
    ours = {side: sum(seconds) for side, seconds in ours.items()}
    assert (
        f"compiled naive attention's trial passes took {sum(compiled['now']):.1f} s against "
        f"{sum(compiled['then']):.1f} s ({min(compiled['now']):.1f}-{max(compiled['now']):.1f} s a job against "
        f"{min(compiled['then']):.1f}-{max(compiled['then']):.1f} s)" in text
    )
    assert f"ours' took {ours['now']:.1f} against {ours['then']:.1f} s" in text
    moved = [abs(cost_split(run / j)["timed"] - cost_split(SLICE / before(j) / j)["timed"]) for j in sweep]
    assert max(moved) < 1
    more = sum(cost_split(run / j) - cost_split(SLICE / before(j) / j) for j in sweep)
    assert (
        f"{more['warmup']:.1f} s of the {sum(walls[j] - charged[j] for j in sweep):.1f} s more is warm-up, "
        f"{more['start']:.1f} s the jobs' starts" in text
    )

    attention = [f"benchmarks/attention/compiled-d{d}.tsv" for d in (16, 128)]
    earlier = [SLICE / "head-5cda776", SLICE.parent / "flash-sweep-rounds"]
    assert (
        f"at d = 16 and 128 took {walls[attention[0]]:.1f} and {walls[attention[1]]:.1f} s against "
        f"{charged[attention[0]]:.1f} and {charged[attention[1]]:.1f} s, their warm-up "
        f"{cost_split(run / attention[0])['warmup']:.1f} and {cost_split(run / attention[1])['warmup']:.1f} s against "
        f"{cost_split(earlier[0] / attention[0])['warmup']:.1f} and "
        f"{cost_split(earlier[1] / attention[1])['warmup']:.1f} s" in text
    )
    added = [walls[j] - charged[j] for j in reversed(attention)]
    assert f"what the two measured here added ({added[0]:.1f} and {added[1]:.1f} s a job)" in text

    now = pd.concat(frame for f, frame in rows.items() if "/sweep/" in str(f))
    then = pd.concat(
        pd.read_csv(SLICE / before(f"benchmarks/flash/sweep/{f.stem}.tsv") / "rows/flash/sweep" / f.name)
        for f in rows
        if "/sweep/" in str(f)
    )
    both = sweep_ratios(then, now)
    naive = both[both["implementation"] == "naive_compiled"]
    faster = (naive["r"] < 0.95) & naive["apart"]
    by_length = naive.groupby("seq")["r"].median()
    assert (
        f"within 0.55-1.07 of the earlier runs', {faster.sum()} of {len(naive)} faster by more than 5% with the two "
        f"runs' CIs apart" in text
    )
    assert (naive["r"].min().round(2), naive["r"].max().round(2)) == (0.55, 1.07)
    long = by_length.loc[[8192, 16384, 32768]]
    assert (
        f"is {by_length.loc[128]:.2f} at 128 keys, {by_length.loc[256]:.2f} at 256, {long.min():.2f}-{long.max():.2f} "
        f"at 8192-32768 and {by_length.loc[65536]:.2f} at 65536" in text
    )
    same = (
        pd.DataFrame(  # section 27's script: the forward, ms, by dynamic, cache and length
            [
                line.split(" | ")[:4]
                for line in (ROOT / "notes/logs/2026-12-01-compiled_naive_cache-4f8e524-h200.txt")
                .read_text()
                .splitlines()[1:]
            ],
            columns=["dynamic", "cache", "seq", "forward"],
        )
        .astype({"seq": int, "forward": float})
        .pivot_table(index=["cache", "seq"], columns="dynamic", values="forward")
    )
    per_length = (same["dynamic=false"] / same["dynamic=auto"]).loc[(slice(None), [8192, 16384])]
    assert f"took {per_length.min():.2f}-{per_length.max():.2f} of the dynamic graph's time" in text
    steady = both[both["implementation"].isin(["naive", "sdpa_flash"])]["r"]
    assert f"flash backend lie within {steady.min():.2f}-{steady.max():.2f} of the earlier medians, none" in text
    assert ((steady - 1).abs() <= 0.05).all()
    cudnn = both[both["implementation"] == "sdpa_cudnn"]
    moved = cudnn[((cudnn["r"] - 1).abs() > 0.05) & cudnn["apart"]]
    assert set(moved["pass"]) == {"forward"} and moved["seq"].max() <= 1024 and (moved["r"] < 1).all()
    assert (
        f"cuDNN backend within {cudnn['r'].min():.2f}-{cudnn['r'].max():.2f}, {len(moved)} of {len(cudnn)} faster by "
        f"more than 5% with the CIs apart (forwards at 1024 keys or fewer)" in text
    )
    mine = both[both["implementation"] == "ours_triton"]
    far = mine[(mine["r"] - 1).abs() > 0.05]
    assert far["apart"].all() and far["seq"].max() <= 4096
    assert (
        f"Ours lie within {mine['r'].min():.2f}-{mine['r'].max():.2f}: {len(far)} of {len(mine)} more than 5% apart, "
        f"every one with the CIs apart ({(far['r'] < 1).sum()} faster, {(far['r'] > 1).sum()} slower), all at "
        f"{far['seq'].max()} keys or fewer" in text
    )
    recorded = then[(then["implementation"] == "ours_triton") & then["tiles"].notna()]
    assert set(zip(recorded["dtype"], recorded["d"])) == {("bf16", 64)}
    picked = both[(both["implementation"] == "ours_triton") & (both["dtype"] == "bf16") & (both["d"] == 64)]
    picked = picked[(picked["pass"] == "forward_backward") & (picked["seq"] == 512)].iloc[0]
    assert picked["tiles_b"].startswith("dq 128x64 8w") and picked["tiles_a"].startswith("dq 64x32 4w")
    assert "picked dQ tiles of 128 x 64 with 8 warps where that one picked 64 x 32 with 4" in text
    assert f"and took {picked['r']:.2f} times as long" in text

    study = {}
    for d, old in zip((16, 128), earlier):
        pair = pd.read_csv(old / f"rows/attention/compiled-d{d}.csv").merge(
            rows[run / f"rows/attention/compiled-d{d}.csv"], on="seq", suffixes=("_a", "_b")
        )
        study[d] = pair[(pair["status_a"] == "ok") & (pair["status_b"] == "ok")]
    pairs = pd.concat(study.values())
    for name in ("forward", "backward"):
        pairs[name] = pairs[f"{name}_median_ms_b"] / pairs[f"{name}_median_ms_a"]
        pairs[f"{name}_faster"] = pairs[f"{name}_ci95_high_ms_b"] < pairs[f"{name}_ci95_low_ms_a"]
    assert pairs["forward_faster"].all() and pairs["backward_faster"].sum() == len(pairs) - 1
    ran = sorted(pairs["seq"].unique())
    assert (
        f"every length that ran ({ran[0]}-{ran[-1]}; {pairs['forward'].min():.2f}-{pairs['forward'].max():.2f} of the"
        in text
    )
    assert (
        f"backward at {pairs['backward_faster'].sum()} of {len(pairs)} "
        f"({pairs['backward'].min():.2f}-{pairs['backward'].max():.2f})" in text
    )

    assert set(now["status"]) == {"ok", "skipped"}
    graphed = now[now["graphed_median_ms"].notna()]
    assert f"{(graphed_halfwidth(graphed) <= 0.01).sum()} of the {len(graphed)} graphed CIs lie within 1%" in text

    full, wide = (
        summary(project(pd.read_csv(SLICE / name), costs_before(SECTION_19)), 4).set_index("study")
        for name in ("jobs.csv", "jobs-wide.csv")
    )
    then = summary(project(pd.read_csv(SLICE / "jobs.csv"), costs_before(SECTION_18)), 4).set_index("study")
    assert_projection(text, full, wide, then, "17", ("flash", "attention"))


def test_section_19s_jobs_and_statements_are_its_files():
    """Section 19: each job of its run is charged its benchmark's wall time and tabled with its charge
    before (job_costs.py without the run), its benchmark and its cost split; its statements are the
    run's files against the charges before; and the projection is the committed one, against section
    18's."""
    costs = pd.read_csv(SLICE / "job_costs.csv").set_index("job")
    before = costs_before(SECTION_19).set_index("job")
    section = readme_section("## 19. ", "## What is next")
    text, lines = " ".join(section.split()), section.splitlines()
    run = SLICE / SECTION_19
    walls, charged = cost_table(SECTION_19, lines, costs, lambda job: before.loc[job, "wall_s"])
    assert len(walls) == 38
    assert len({job.split("/")[1] for job in walls}) == 7 and f"{len(walls)} jobs of seven studies" in text
    rows = {f: pd.read_csv(f) for f in sorted(run.glob("rows/**/*.csv"))}
    assert {c for frame in rows.values() if "commit" in frame for c in frame["commit"]} == {"60b67397ee3c"}
    total, total_before = sum(walls.values()), sum(charged.values())
    more = {job: walls[job] - charged[job] for job in walls}
    compiled = ("attention/compiled-d32", "attention/compiled-d64")
    big = [f"benchmarks/{n}.tsv" for n in compiled] + ["benchmarks/batch/2.7B.tsv"]
    rest = sum(v for job, v in more.items() if job not in big)
    assert (
        f"The {len(walls)} jobs took {total:.1f} s, where they were charged {total_before:.1f} s:** the attention "
        f"study's two compiled jobs {more[big[0]] + more[big[1]]:.1f} s more, the batch study's 2.7B job "
        f"{more[big[2]]:.1f} s more, the other {len(walls) - 3} jobs {-rest:.1f} s less" in text
    )
    exits = {job: walls[job] - cost_split(run / job).sum() for job in walls}

    def pair(names, value) -> str:
        return " and ".join(f"{value(f'benchmarks/{n}.tsv'):.1f}" for n in names)

    earlier = {f"benchmarks/{n}.tsv": SLICE / before.loc[f"benchmarks/{n}.tsv", "source"] for n in compiled}
    assert set(earlier.values()) == {SLICE / "head-5cda776", SLICE / "one-job-each"}
    assert (
        f"at d = 32 and 64 took {pair(compiled, walls.get)} s against {pair(compiled, charged.get)} s: their warm-up "
        f"{pair(compiled, lambda j: cost_split(run / j)['warmup'])} s against "
        f"{pair(compiled, lambda j: cost_split(earlier[j] / j)['warmup'])} s (naive attention compiled for each "
        f"length), their timed phases {pair(compiled, lambda j: cost_split(run / j)['timed'])} s against "
        f"{pair(compiled, lambda j: cost_split(earlier[j] / j)['timed'])} s" in text
    )
    late = costs[costs.index.str.match(r"benchmarks/(attention|flash/sweep)/")]
    assert set(late["source"]) <= {SECTION_18, SECTION_19}

    profile = {size: f"benchmarks/profile/{size}.tsv" for size in ("small", "medium", "large")}
    assert all(before.loc[profile[s], "source"].endswith("(cuts/ranges)") for s in ("small", "medium"))
    assert before.loc[profile["large"], "source"] == "cuts/ranges"
    assert (
        f"small took {walls[profile['small']]:.1f} s where it was estimated at {charged[profile['small']]:.1f}, medium "
        f"{walls[profile['medium']]:.1f} s where it was estimated at {charged[profile['medium']]:.1f}; large took "
        f"{walls[profile['large']]:.1f} s against {charged[profile['large']]:.1f} s measured at `cuts/ranges`" in text
    )
    nsys = ", ".join(f"{cost_split(run / profile[s])['profile']:.1f}" for s in ("small", "medium"))
    assert f"is {nsys} and {cost_split(run / profile['large'])['profile']:.1f} s of it" in text

    batch, h100 = "benchmarks/batch/2.7B.tsv", pd.read_csv(SLICE.parent / "h100/batch/batch.csv")
    assert before.loc[batch, "source"] == "batch"
    for frame, fit, out in ((rows[run / "rows/batch/2.7B.csv"], 32, 64), (h100[h100["size"] == "2.7B"], 8, 16)):
        assert frame.loc[frame["status"] == "ok", "batch_size"].max() == fit
        assert frame.loc[frame["status"] == "oom", "batch_size"].min() == out
    assert f"it took {walls[batch]:.1f} s against {charged[batch]:.1f} on an H100 at `1cae734`," in text
    assert set(h100["commit"].astype(str).str[:7]) == {"1cae734"}
    small = "benchmarks/batch/small.tsv"
    assert f"Small took {walls[small]:.1f} s against {charged[small]:.1f}." in text
    cost = " ".join(readme_section("## 3. ", "## 4. ").split())
    assert (
        f"took {walls[batch]:.1f} s where the H100's took {charged[batch]:.1f} at an older commit (section 19)" in cost
    )

    def sums(study: str) -> tuple[str, str, str]:
        jobs = [j for j in walls if j.startswith(f"benchmarks/{study}/")]
        return f"{len(jobs)} {study}", f"{sum(walls[j] for j in jobs):.1f}", f"{sum(charged[j] for j in jobs):.1f}"

    memory, warmup, precision = sums("memory"), sums("warmup"), sums("precision")
    assert f"the {memory[0]} jobs {memory[1]} s against {memory[2]}" in text
    assert f"the {warmup[0].replace('warmup', 'warm-up')} jobs {warmup[1]} against {warmup[2]}" in text
    assert f"the {precision[0]} jobs {precision[1]} against {precision[2]}" in text
    e2e = [f"benchmarks/e2e/{n}.tsv" for n in ("medium/bf16-eager", "small/fp32-eager")]
    assert (
        f"e2e medium bf16-eager {walls[e2e[0]]:.1f} against {charged[e2e[0]]:.1f} "
        f"and small fp32-eager {walls[e2e[1]]:.1f} against {charged[e2e[1]]:.1f}" in text
    )

    held = [exits[f"benchmarks/{n}.tsv"] for n in compiled]
    eager = [exits[j] for j in walls if "/attention/eager-" in j]
    others = [exits[j] for j in walls if "/attention/" not in j]
    then = [
        benchmark_wall(t) - cost_split(t).sum() for t in sorted((SLICE / SECTION_18).glob("benchmarks/attention/*.tsv"))
    ]
    assert (
        f"hold their GPU {min(held):.1f}-{max(held):.1f} s after their rows are written** (the `exit` column; "
        f"{min(then):.1f}-{max(then):.1f} s in section 18), where its eager jobs take "
        f"{min(eager):.1f}-{max(eager):.1f} s and every other job of this run {max(others):.1f} s at most" in text
    )
    assert min(held) > 5 * max(others)
    nxt = " ".join(readme_section("## What is next", "- **The 2.7B ladder point on").split())
    assert (
        f"jobs' {min(then):.1f}-{max(held):.1f} s after their write** (sections 18 and 19): "
        f"{sum(held) + sum(then):.0f} s of the grid in its four compiled jobs" in nxt
    )

    statuses = pd.concat(
        frame.assign(study=f.relative_to(run / "rows").parts[0]) for f, frame in rows.items() if "status" in frame
    )
    assert set(statuses["status"]) == {"ok", "oom"}
    oom = statuses[statuses["status"] == "oom"]
    assert set(oom["study"]) == {"attention", "batch"} and set(oom["batch_size"].dropna()) == {64}
    attention = oom[oom["study"] == "attention"]
    assert set(attention.loc[attention["compile"] == "eager", "seq"]) == {32768, 65536}
    assert set(attention.loc[attention["compile"] == "compiled", "seq"]) == {65536}
    assert "(32768 keys and more, eager; 65536, compiled) or of the batch study (batch 64)" in text
    graphed = pd.concat(
        frame[frame["graphed_median_ms"].notna()] for frame in rows.values() if "graphed_median_ms" in frame
    )
    assert (graphed_halfwidth(graphed) <= 0.01).all()
    assert {f.relative_to(run / "rows").parts[0] for f, frame in rows.items() if "graphed_median_ms" in frame} == {
        "e2e",
        "batch",
    }
    assert f"the {len(graphed)} graphed CIs (e2e and batch) all lie within 1%" in text

    full, wide = (pd.read_csv(SLICE / f"projection{n}.csv").set_index("study") for n in ("", "-wide"))
    then = summary(project(pd.read_csv(SLICE / "jobs.csv"), costs_before(SECTION_19)), 4).set_index("study")
    changed = [s for s in full.index[:-1] if f"{full.loc[s, 'gpu_min']:.1f}" != f"{then.loc[s, 'gpu_min']:.1f}"]
    assert set(changed) == {"attention", "batch", "profile", "e2e", "precision"}
    assert_projection(text, full, wide, then, "18", changed)
    one_gpu = pd.read_csv(SLICE / "jobs.csv").merge(costs.reset_index(), on="job")
    one_gpu = one_gpu[one_gpu["gpus"] == 1]
    split = [
        (SLICE / source / job).with_suffix(".cost.csv").exists()
        for job, source in zip(one_gpu["job"], one_gpu["source"])
    ]
    unmeasured = one_gpu[~pd.Series(split, index=one_gpu.index) | one_gpu["source"].str.contains("lower bound")]
    assert set(unmeasured["job"]) == {"benchmarks/ladder/2.7B/ctx1024.tsv", "benchmarks/ladder/2.7B/ctx1024-timed.tsv"}


def test_job_costs_refuses_a_run_it_does_not_charge_by_name(tmp_path):
    """--without names a run charged as measured; any other name is an error that names it, and no
    costs are written."""
    out = tmp_path / "job_costs.csv"
    proc = job_costs(out, "head-0000000", capture_output=True, text=True)
    assert proc.returncode == 2 and "--without head-0000000: not a run charged as measured" in proc.stderr
    assert not out.exists()
