"""What a run cost: wall time and GPU-minutes per study, from the benchmark file Snakemake writes for
every measuring job (its ``benchmark:`` directive). Read off a reference run, it tells a user what
the full grid costs on their GPU before they start it.

    python -m lmperf.report.cost --gpus 1,1,2 --out results/cost.csv \\
        benchmarks/e2e/small/fp32-eager.tsv benchmarks/e2e/small/bf16-eager.tsv benchmarks/ddp/sharding.tsv

A benchmark file holds the wall time of the job's last run, so a study measured over several
invocations (slices of a grid) is charged what each of its current results cost.

GPU-minutes count only the jobs that held a GPU: ``--gpus`` gives the GPUs each job's rule claims on a
GPU machine, and the job's own result rows (``results/`` mirrors ``benchmarks/``) say where it ran: a
job whose rows were measured on a CPU (``device_type``) held none, so a CPU-only run costs no GPU time.

Where the time went: each job's ``benchmarks/<target>.cost.csv`` (lmperf.measure.phases), beside its
benchmark file, splits it into start, build, warm-up, capture, settle, timed, profile, check, write
and other; ``exit`` is the rest of the benchmark's wall time: the processes ending after the last write (a
study's job ends without Python's finalization, lmperf.studies.run_study; torchrun's launcher, around a
multi-process job, ends as usual).
The same files give each job's start, GPUs and host, so the section also says how long the run took
from its first job's start to its last job's end, and on which GPUs.
"""

import argparse
import logging
from pathlib import Path

import pandas as pd

from lmperf.log import to_stderr
from lmperf.measure.env import git_commit
from lmperf.measure.phases import PHASES
from lmperf.measure.rows import write_csv_atomic
from lmperf.report.markdown import num, table
from lmperf.report.projection import study_of

log = logging.getLogger(__name__)


def result_of(benchmark: str) -> Path:
    """The result file of the job that wrote this benchmark file: benchmarks/X.tsv -> results/X.csv."""
    parts = Path(benchmark).parts
    at = parts.index("benchmarks")
    return Path(*parts[:at], "results", *parts[at + 1 :]).with_suffix(".csv")


def device_type(result: Path) -> str:
    """Where a job ran, from its rows: "cuda" if any row was measured on a GPU, else the rows' device
    type ("cpu"); "" where there is no result file with that column to say."""
    if not result.exists():
        return ""
    rows = pd.read_csv(result, usecols=lambda c: c == "device_type")
    if "device_type" not in rows or rows.empty:
        return ""
    types = set(rows["device_type"].dropna().astype(str))
    return "cuda" if "cuda" in types else ",".join(sorted(types))


def collect(paths: list[str], gpus: list[int]) -> pd.DataFrame:
    """One row per job: its study (the folder under benchmarks/), wall seconds, where it ran and the
    GPUs it held: the count its rule claims (``gpus``), or none where its rows ran on a CPU."""
    if len(paths) != len(gpus):
        raise ValueError(f"{len(paths)} benchmark files but {len(gpus)} GPU counts")
    rows = []
    for path, claimed in zip(paths, gpus):
        wall_s = float(pd.read_csv(path, sep="\t")["s"].iloc[-1])
        ran_on = device_type(result_of(path))
        held = claimed if ran_on in ("cuda", "") else 0
        rows.append(
            {
                "study": study_of(path),
                "job": path,
                "wall_s": wall_s,
                "device_type": ran_on,
                "gpus": held,
                **phase_columns(Path(path).with_suffix(".cost.csv"), wall_s),
            }
        )
    return pd.DataFrame(rows)


def phase_columns(path: Path, wall_s: float) -> dict:
    """A job's split (``<phase>_s`` for PHASES, and ``exit_s``: its wall time past the split), its start,
    GPUs and host, from its cost file; NaN and empty where the job wrote none."""
    if not path.exists():
        return {**{f"{name}_s": float("nan") for name in (*PHASES, "exit")}, "start_epoch": float("nan")}
    split = pd.read_csv(path, keep_default_na=False)
    seconds = dict(zip(split["phase"], split["seconds"]))
    return {
        **{f"{name}_s": float(seconds.get(name, 0.0)) for name in PHASES},
        "exit_s": wall_s - float(split["seconds"].sum()),
        "start_epoch": float(split["job_start"].iloc[0]),
        "gpu_ids": str(split["gpus"].iloc[0]),
        "host": str(split["host"].iloc[0]),
    }


def totals(jobs: pd.DataFrame) -> tuple[float, float]:
    """The run's wall time and GPU-minutes, in minutes: wall time x the GPUs each job held."""
    return jobs["wall_s"].sum() / 60, (jobs["wall_s"] * jobs["gpus"]).sum() / 60


def held_gpus(jobs: pd.DataFrame) -> bool:
    """Whether any job of the run held a GPU."""
    return bool((jobs["gpus"] > 0).any())


def elapsed(jobs: pd.DataFrame) -> tuple[float, list[str]]:
    """Minutes from the first job's start to the last job's end (gaps between allocations included),
    and the GPUs the jobs ran on, as host:id; (NaN, []) where no job wrote its split."""
    timed = jobs.dropna(subset=["start_epoch"])
    if timed.empty:
        return float("nan"), []
    minutes = ((timed["start_epoch"] + timed["wall_s"]).max() - timed["start_epoch"].min()) / 60
    used = timed[timed["gpus"] > 0]
    gpus = sorted(
        {f"{host}:{gpu}" for host, ids in zip(used["host"], used["gpu_ids"]) for gpu in ids.split(",") if gpu}
    )
    return minutes, gpus


def split_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per study, the share of its jobs' wall time in each phase (phases no job spent time in left out)."""
    names = [name for name in (*PHASES, "exit") if (jobs[f"{name}_s"].fillna(0) > 0.0005).any()]
    per_study = jobs.dropna(subset=["start_s"]).groupby("study", sort=False)[[f"{n}_s" for n in names]].sum()
    share = per_study.div(per_study.sum(axis=1), axis=0)
    out = pd.DataFrame({"study": share.index})
    for name in names:
        out[name] = [f"{100 * v:.0f}%" for v in share[f"{name}_s"]]
    return out


def with_split_columns(jobs: pd.DataFrame) -> pd.DataFrame:
    """The cost table with the split's columns that older cost files lack, empty."""
    split_columns = [f"{name}_s" for name in (*PHASES, "exit")] + ["start_epoch", "gpu_ids", "host"]
    return jobs.reindex(columns=[*jobs.columns, *(c for c in split_columns if c not in jobs)])


def render(jobs: pd.DataFrame) -> str:
    """The "Cost of this run" section: per study, jobs, wall time and GPU-minutes, and their total."""
    jobs = with_split_columns(jobs)
    jobs = jobs.assign(gpu_min=jobs["wall_s"] * jobs["gpus"] / 60)
    per_study = jobs.groupby("study", sort=False).agg(
        jobs=("job", "size"),
        wall_min=("wall_s", lambda s: s.sum() / 60),
        longest_min=("wall_s", lambda s: s.max() / 60),
        gpu_min=("gpu_min", "sum"),
    )
    rows = pd.DataFrame(
        {
            "study": per_study.index,
            "jobs": per_study["jobs"].astype(str),
            "wall time (min)": per_study["wall_min"].map(num),
            "longest job (min)": per_study["longest_min"].map(num),
            "GPU-minutes": per_study["gpu_min"].map(num),
        }
    )
    wall_min, gpu_min = totals(jobs)
    ran = f"{len(jobs)} measuring jobs ran for {num(wall_min)} minutes of wall time"
    run_min, gpus = elapsed(jobs)
    longest = jobs.loc[jobs["wall_s"].idxmax()]
    when = (
        f"From the first job's start to the last one's end the run took {num(run_min)} minutes"
        + (f", on {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({', '.join(gpus)})" if gpus else "")
        + f"; the longest job, `{longest['job']}`, took {num(longest['wall_s'] / 60)} minutes."
        if run_min == run_min
        else f"The longest job, `{longest['job']}`, took {num(longest['wall_s'] / 60)} minutes."
    )
    split = split_table(jobs)
    where = (
        [
            "Where each study's job time went, from the split each job wrote beside its benchmark file "
            "(`lmperf.measure.phases`): *start* is process start and imports, *warmup* includes compiling and "
            "autotuning, *timed* the measured steps and their statistics, *check* the ladder's loss checks, *exit* "
            "the processes ending after the last write.",
            "",
            table(split),
            "",
        ]
        if len(split)
        else []
    )
    if held_gpus(jobs):
        how = (
            "Wall time of every measuring job, from Snakemake's `benchmark:` files under `benchmarks/`, and "
            "GPU-minutes: wall time × the GPUs the job held (one; one per rank for NCCL all-reduce and DDP; none "
            "for gloo's CPU ranks or a job that ran on the CPU). Aggregation, figures and the report run locally "
            "and are not counted."
        )
        total = f"{ran} and used {num(gpu_min)} GPU-minutes."
    else:
        how = (
            "Wall time of every measuring job, from Snakemake's `benchmark:` files under `benchmarks/`. Every job "
            "ran on the CPU, so the run used no GPU time. Aggregation, figures and the report are not counted."
        )
        rows = rows.drop(columns="GPU-minutes")
        total = f"{ran}."
    return "\n".join(["## Cost of this run", "", how, "", table(rows), "", total, "", *where, when, ""])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", required=True, help="comma-separated GPUs each job's rule claims, one per benchmark file")
    p.add_argument("--out", required=True)
    p.add_argument("benchmarks", nargs="+")
    args = p.parse_args(argv)
    jobs = collect(args.benchmarks, [int(g) for g in args.gpus.split(",")]).assign(commit=git_commit())
    write_csv_atomic(jobs, args.out)
    log.info(f"{len(jobs)} jobs, {jobs['wall_s'].sum():.0f} s of wall time -> {args.out}")


if __name__ == "__main__":
    to_stderr()
    main()
