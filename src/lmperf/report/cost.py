"""What a run cost: wall time and GPU-minutes per study, from the benchmark file Snakemake writes for
every measuring job (its ``benchmark:`` directive). Read off a reference run, it tells a user what
the full grid costs on their GPU before they start it.

    python -m lmperf.report.cost --gpus 1,1,2 --out results/cost.csv \\
        benchmarks/e2e/small/fp32-eager.tsv benchmarks/e2e/small/bf16-eager.tsv benchmarks/ddp/sharding.tsv

A benchmark file holds the wall time of the job's last run, so a study measured over several
invocations (slices of a grid) is charged what each of its current results cost.
"""

import argparse
from pathlib import Path

import pandas as pd

from lmperf.measure.rows import write_csv_atomic
from lmperf.report.markdown import num, table


def collect(paths: list[str], gpus: list[int]) -> pd.DataFrame:
    """One row per job: its study (the folder under benchmarks/), wall seconds and the GPUs it uses."""
    if len(paths) != len(gpus):
        raise ValueError(f"{len(paths)} benchmark files but {len(gpus)} GPU counts")
    rows = []
    for path, held in zip(paths, gpus):
        parts = Path(path).parts
        wall_s = float(pd.read_csv(path, sep="\t")["s"].iloc[-1])
        rows.append({"study": parts[parts.index("benchmarks") + 1], "job": path, "wall_s": wall_s, "gpus": held})
    return pd.DataFrame(rows)


def totals(jobs: pd.DataFrame) -> tuple[float, float]:
    """The run's wall time and GPU-minutes, in minutes: wall time x the GPUs each job uses."""
    return jobs["wall_s"].sum() / 60, (jobs["wall_s"] * jobs["gpus"]).sum() / 60


def render(jobs: pd.DataFrame) -> str:
    """The "Cost of this run" section: per study, jobs, wall time and GPU-minutes, and their total."""
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
    total = (
        f"{len(jobs)} measuring jobs ran for {num(wall_min)} minutes of wall time and used {num(gpu_min)} GPU-minutes."
    )
    return "\n".join(
        [
            "## Cost of this run",
            "",
            "Wall time of every measuring job, from Snakemake's `benchmark:` files under `benchmarks/`, and "
            "GPU-minutes: wall time × the GPUs the job uses on a GPU machine (one; one per rank for NCCL all-reduce "
            "and DDP; none for gloo's CPU ranks). Aggregation, figures and the report run locally and are not counted.",
            "",
            table(rows),
            "",
            total,
            "",
        ]
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", required=True, help="comma-separated GPUs used, one per benchmark file")
    p.add_argument("--out", required=True)
    p.add_argument("benchmarks", nargs="+")
    args = p.parse_args(argv)
    jobs = collect(args.benchmarks, [int(g) for g in args.gpus.split(",")])
    write_csv_atomic(jobs, args.out)
    print(f"{len(jobs)} jobs, {jobs['wall_s'].sum():.0f} s of wall time -> {args.out}")


if __name__ == "__main__":
    main()
