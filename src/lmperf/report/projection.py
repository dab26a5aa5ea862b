"""What a grid will cost before it runs: each job's last measured wall time, scheduled onto N GPUs.

    snakemake --cores 1 --config grid=full device=cuda -- results/jobs.csv   # the grid's measuring jobs
    python -m lmperf.report.projection project --jobs results/jobs.csv --gpus 4 \
        --costs report/reference/one-allocation/job_costs.csv --out results/projection.csv
    python -m lmperf.report.projection targets --jobs results/jobs.csv \
        --costs report/reference/one-allocation/job_costs.csv --gpus 1   # TARGETS:SECONDS for scripts/fill-slice

``results/jobs.csv`` lists every measuring job of the grid in force: its benchmark file (the job's
name), study and the GPUs it holds. ``--costs`` are job costs already measured, in the format of
``lmperf.report.cost`` (``results/cost.csv`` of an earlier run): ``job`` (benchmark file) and
``wall_s``; where several files cost the same job, the last one given wins, and a row whose job ran
on a CPU (``device_type``) costs nothing on a GPU and is not used. A job no file costs is charged the
median wall time of the costed jobs of its kind (its name with the numbers masked:
``ddp/train-n4-b16`` is of the kind of ``ddp/train-n2-b4``), else of its study, and marked
``estimated``; a study with no costed job at all is refused, by name, since nothing says what it costs.

GPU-minutes are wall time × GPUs held. A job that needs more GPUs than the machine has writes a
skipped row at once, and is charged nothing. The wall time on N GPUs is an estimate: the makespan of
a schedule that, each time GPUs free, starts the waiting jobs in the run's order (``priority``: the
jobs that hold more GPUs first, then the longest first) as far as the free GPUs go (``makespan``).
It leaves out the CPU-only jobs (aggregates, figures, the report), which run beside the measuring
ones, and that a few measuring jobs wait for another (a ladder point's checks for its timed turns),
which on many GPUs can bound the wall time. The pipeline gives each measuring job that order as its
Snakemake priority (``priorities``), so a run starts its jobs in the same order; Snakemake's
scheduler still weighs other things (cores, the jobs a finished one makes ready), so a run can do
worse.
"""

import argparse
import heapq
import logging
import math
import re
from pathlib import Path

import pandas as pd

from lmperf.log import to_stderr

log = logging.getLogger(__name__)


def study_of(benchmark: str) -> str:
    """The study a job belongs to: its folder under benchmarks/ (benchmarks/e2e/small/x.tsv -> e2e)."""
    parts = Path(benchmark).parts
    return parts[parts.index("benchmarks") + 1]


def job_list(benchmarks: list[str], gpus: list[int]) -> pd.DataFrame:
    """The grid's measuring jobs: benchmark file, study (its folder under benchmarks/) and GPUs held."""
    if len(benchmarks) != len(gpus):
        raise ValueError(f"{len(benchmarks)} benchmark files but {len(gpus)} GPU counts")
    return pd.DataFrame({"job": benchmarks, "study": [study_of(path) for path in benchmarks], "gpus": gpus})


def target(benchmark: str) -> str:
    """The result a job makes: its benchmark file's path under results/, as a .csv
    (benchmarks/e2e/xl/bf16-eager.tsv -> results/e2e/xl/bf16-eager.csv)."""
    return "results/" + benchmark.split("benchmarks/", 1)[-1].removesuffix(".tsv") + ".csv"


def fill_slice_pairs(projected: pd.DataFrame, n_gpus: int | None = None) -> list[str]:
    """The jobs as scripts/fill-slice takes them, TARGETS:SECONDS (their charged wall time, rounded up),
    in the job list's order; with ``n_gpus``, only the jobs that fit that many GPUs (on fewer, a job
    writes a skipped row, which a later run on more GPUs would take for done). A job that waits for
    another (a ladder point's checks, ``ctxN``, for its timed job, ``ctxN-timed``) is one pair with
    it, charged both: fill-slice may leave a pair for the next allocation and start a later one, which
    would then run the job waited for too."""
    if n_gpus is not None:
        projected = projected[projected["gpus"] <= n_gpus]
    walls = dict(zip(projected["job"], projected["wall_s"]))
    pairs = []
    for job in walls:
        if job.endswith("-timed.tsv") and job.replace("-timed.tsv", ".tsv") in walls:
            continue  # paired with the job that waits for it, below
        first = job.replace(".tsv", "-timed.tsv")
        jobs = [first, job] if first in walls else [job]
        pairs.append(f"{','.join(map(target, jobs))}:{math.ceil(sum(walls[j] for j in jobs))}")
    return pairs


def kind(job: str) -> str:
    """A job's name under benchmarks/ with its numbers masked: the jobs of one rule at other sizes,
    ranks or dtypes (``benchmarks/flash/sweep/bf16-d64.tsv`` -> ``flash/sweep/#-d#``)."""
    name = job.split("benchmarks/", 1)[-1].removesuffix(".tsv")
    return re.sub(r"(bf|fp)?\d+(\.\d+)?", "#", name)


def project(jobs: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """Each job with the wall time it is charged: its measured cost, else the median of its kind's
    measured jobs, else of its study's (``estimated``). Costs of jobs that ran on a CPU are left out."""
    if "device_type" in costs:
        costs = costs[costs["device_type"].fillna("").isin(["cuda", ""])]
    measured = costs.drop_duplicates("job", keep="last").set_index("job")["wall_s"]
    out = jobs.assign(
        wall_s=jobs["job"].map(measured), estimated=~jobs["job"].isin(measured.index), kind=jobs["job"].map(kind)
    )
    unknown = sorted(set(out["study"]) - set(out.dropna(subset=["wall_s"])["study"]))
    if unknown:
        raise ValueError(f"no measured cost for any job of {', '.join(unknown)}: nothing to project them from")
    for key in ("kind", "study"):
        out["wall_s"] = out["wall_s"].fillna(out[key].map(out.groupby(key)["wall_s"].median()))
    return out.drop(columns="kind")


GPU_TIER = 10_000  # seconds, longer than any job of a grid runs: a job's GPUs order it before its length


def priority(wall_s: float, gpus: int) -> int:
    """A job's place in a run's order, as a Snakemake priority (the higher, the sooner): the jobs that
    hold more GPUs first, then the longest first. It is the GPUs squared times GPU_TIER plus the whole
    seconds (a dry run's ``priority: 160160``: four GPUs, 160 s).

    Why GPUs first: a job that needs several GPUs starts only when that many are free at once. Put
    among one-GPU jobs, it waits while the GPUs it will take sit idle, or, where the scheduler fills
    each GPU as it frees, until the one-GPU jobs are done, and GPUs idle then. Started first, while
    every GPU is free, it leaves none idle: with section 15's costs the full grid on four GPUs was
    projected at 43.4 minutes this way and 44.5 longest first, both filling GPUs as they free
    (report/reference/one-allocation/README.md).

    Why squared: Snakemake's default scheduler starts the set of ready jobs whose priorities sum
    highest, so a job holding g GPUs must outweigh any jobs that fill the same g GPUs with fewer
    each; g² > (g - 1) g, with each job's seconds under GPU_TIER, makes it so."""
    return gpus**2 * GPU_TIER + min(round(wall_s), GPU_TIER - 1)


def priorities(benchmark_gpus: dict[str, int], cost_files: list[str]) -> dict[str, int]:
    """Each measuring job's Snakemake priority, ``priority`` of its projected wall time (``project``)
    and its GPUs, so that a run starts its jobs in the order the projected wall time assumes. The costs
    are those of ``cost_files`` that exist, the later winning; one that is not a cost table (empty, no
    ``job`` or ``wall_s`` column) is passed over with a warning. With none, or none for some study of
    the grid, there is nothing to order by: every job keeps priority 0 and Snakemake its own order.

    The Snakefile calls this as it builds the DAG, so this module imports no torch."""
    found = []
    for path in filter(lambda path: Path(path).exists(), cost_files):
        try:
            found.append(pd.read_csv(path).astype({"job": str, "wall_s": float}))
        except (OSError, ValueError, KeyError) as error:  # empty, no job or wall_s column, not numbers
            log.warning(f"{path} passed over, not a cost table: {error}")
    if not found:
        return {}
    try:
        projected = project(job_list(list(benchmark_gpus), list(benchmark_gpus.values())), pd.concat(found))
    except ValueError as error:
        log.info(f"jobs not ordered: {error}")
        return {}
    return {
        job: priority(wall, gpus)
        for job, wall, gpus in zip(projected["job"], projected["wall_s"], projected["gpus"], strict=True)
    }


def makespan(walls: list[float], gpus: list[int], n_gpus: int, order=priority) -> float:
    """Seconds until the last job ends when, at the start and each time jobs end, the waiting jobs
    start in the run's order (``order`` of a job's wall time and GPUs, the highest first) as far as
    the free GPUs go, a job that does not fit letting the next that does go ahead, as Snakemake fills
    GPUs as they free. A job needing more GPUs than the machine has is refused."""
    if n_gpus < 1:
        raise ValueError(f"a machine of {n_gpus} GPUs runs no GPU job")
    if max(gpus, default=0) > n_gpus:
        raise ValueError(f"a job needs {max(gpus)} GPUs, the machine has {n_gpus}")
    waiting = sorted(zip(walls, gpus), key=lambda job: -order(*job))
    running, free, now, end = [], n_gpus, 0.0, 0.0  # running: a heap of (end, GPUs)
    while waiting:
        still = []
        for wall, need in waiting:
            if need <= free:
                free -= need
                heapq.heappush(running, (now + wall, need))
                end = max(end, now + wall)
            else:
                still.append((wall, need))
        waiting = still
        now = running[0][0]  # the next end: the GPUs of every job ending then free
        while running and running[0][0] == now:
            free += heapq.heappop(running)[1]
    return end


def summary(projected: pd.DataFrame, n_gpus: int) -> pd.DataFrame:
    """Per study: jobs, estimated jobs, GPU-minutes and the longest job; and the grid's total, with its
    wall time on ``n_gpus`` GPUs (minutes). Jobs that need more GPUs than that write a skipped row:
    they are charged nothing, so none of them counts as estimated."""
    too_many = projected["gpus"] > n_gpus
    projected = projected.assign(
        wall_s=projected["wall_s"].where(~too_many, 0.0),
        gpus=projected["gpus"].where(~too_many, 0),
        estimated=projected["estimated"] & ~too_many,
    )
    gpu_s = projected["wall_s"] * projected["gpus"]
    per = projected.assign(gpu_min=gpu_s / 60).groupby("study", sort=False)
    table = pd.DataFrame(
        {
            "jobs": per.size(),
            "estimated": per["estimated"].sum(),
            "gpu_min": per["gpu_min"].sum(),
            "longest_min": per["wall_s"].max() / 60,
        }
    ).reset_index()
    total = {
        "study": "all",
        "jobs": len(projected),
        "estimated": int(projected["estimated"].sum()),
        "gpu_min": gpu_s.sum() / 60,
        "longest_min": projected["wall_s"].max() / 60,
    }
    table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    wall = makespan(list(projected["wall_s"]), list(projected["gpus"]), n_gpus) / 60
    return table.assign(gpus=n_gpus, wall_min=[float("nan")] * (len(table) - 1) + [wall])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("jobs", help="write the grid's job list (the pipeline's `jobs` rule runs this)")
    listing.add_argument("--gpus", required=True, help="comma-separated GPUs each job holds, one per benchmark file")
    listing.add_argument("--out", required=True)
    listing.add_argument("benchmarks", nargs="+")
    projecting = sub.add_parser("project", help="project the grid's GPU-minutes and wall time")
    projecting.add_argument("--jobs", required=True, help="the grid's job list (results/jobs.csv)")
    projecting.add_argument("--costs", nargs="+", required=True, help="measured job costs (lmperf.report.cost CSVs)")
    projecting.add_argument("--gpus", type=int, required=True, help="GPUs of the machine to project onto")
    projecting.add_argument("--out", required=True, help="the per-study table, and the total with its wall time")
    pairing = sub.add_parser("targets", help="print the jobs as scripts/fill-slice takes them, TARGETS:SECONDS")
    pairing.add_argument("--jobs", required=True, help="the grid's job list (results/jobs.csv)")
    pairing.add_argument("--costs", nargs="+", required=True, help="measured job costs (lmperf.report.cost CSVs)")
    pairing.add_argument("--gpus", type=int, default=None, help="leave out the jobs that need more GPUs than this")
    args = p.parse_args(argv)
    if args.command == "targets":
        costs = pd.concat([pd.read_csv(path) for path in args.costs], ignore_index=True)
        print(" ".join(fill_slice_pairs(project(pd.read_csv(args.jobs), costs), args.gpus)))
        return
    from lmperf.measure.rows import write_csv_atomic  # here, not above: importing lmperf.measure imports torch

    if args.command == "jobs":
        write_csv_atomic(job_list(args.benchmarks, [int(g) for g in args.gpus.split(",")]), args.out)
        return
    jobs = pd.read_csv(args.jobs)
    costs = pd.concat([pd.read_csv(path) for path in args.costs], ignore_index=True)
    table = summary(project(jobs, costs), args.gpus)
    write_csv_atomic(table, args.out)
    total = table.iloc[-1]
    log.info(
        f"{total['jobs']} jobs ({total['estimated']} estimated): {total['gpu_min']:.0f} GPU-minutes, "
        f"{total['wall_min']:.0f} minutes on {args.gpus} GPUs -> {args.out}"
    )


if __name__ == "__main__":
    to_stderr()
    main()
