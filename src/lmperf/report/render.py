"""Render report/final.md from the aggregated result CSVs; each study contributes one section."""

import argparse
import importlib
import re
from pathlib import Path

import pandas as pd

from lmperf.log import to_stderr
from lmperf.measure.rows import atomic_path
from lmperf.registry import BEYOND_HANDOUT, HANDOUT, STUDIES, heading, sections
from lmperf.report import cost, summary
from lmperf.report.markdown import anchor, num


def read(path: Path) -> pd.DataFrame:
    """A result CSV, or its gzipped copy beside it (``<name>.csv.gz``: the committed reference keeps
    its large CSVs compressed)."""
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def not_in_grid(section: str, key: str) -> str:
    """The section of a study the grid leaves out (its list ``key`` is empty)."""
    return f"## {section}\n\nNot in this run's grid (`{key}` is empty).\n"


def render_only(results: Path, studies: tuple[str, ...]) -> str:
    """The sections of ``studies`` alone, in the report's order, for a run that measured only those."""
    run = [study for study in sections() if study.name in studies]
    frames = {name: read(results / f"{name}.csv") for study in run for name in study.reads}
    return "\n".join(section(study, frames) for study in run)


def render_timing(results: Path) -> str:
    """The sections of the timing studies alone (e2e with warm-up, profiling): ``--timing-only``."""
    return render_only(results, ("e2e", "profile"))


def render_memory_comm(results: Path) -> str:
    """The memory, communication and data-parallel sections alone, for a run that measured only
    those (and the e2e points memory is cross-checked against): ``--memory-comm-only``."""
    return render_only(results, ("memory", "allreduce", "ddp"))


def provenance(frames: list[pd.DataFrame], jobs: pd.DataFrame) -> str:
    """The header's account of where the numbers come from: the commits and devices named in the
    rows (one commit is a run that can be remade; several are said as such) and what the run cost."""

    def values(column):
        return sorted({str(v) for f in frames if column in f for v in f[column].dropna()})

    commits, devices = values("commit"), values("device_name")
    made = (
        f"Every row comes from commit `{commits[0]}`"
        if len(commits) == 1
        else f"The rows come from {len(commits)} commits ({', '.join(f'`{c}`' for c in commits)}), so not from one run"
    )
    wall_min, gpu_min = cost.totals(jobs)
    gpu_time = f" and {num(gpu_min)} GPU-minutes" if cost.held_gpus(jobs) else " on the CPU, with no GPU"
    return (
        f"{made}, measured on {', '.join(devices) or 'no device'}. Its {len(jobs)} measuring jobs took "
        f"{num(wall_min)} minutes of wall time{gpu_time}{_per_study_gpu_minutes(jobs)} (more in Cost of this run)."
        + _elapsed(jobs)
    )


def _per_study_gpu_minutes(jobs: pd.DataFrame) -> str:
    """GPU-minutes per study, largest first, for the header; empty where no job held a GPU."""
    if not cost.held_gpus(jobs):
        return ""
    per = (jobs["wall_s"] * jobs["gpus"] / 60).groupby(jobs["study"]).sum().sort_values(ascending=False)
    return ": " + ", ".join(f"{study} {num(minutes)}" for study, minutes in per.items() if minutes > 0)


def _elapsed(jobs: pd.DataFrame) -> str:
    """From the first job's start to the last one's end, and on how many GPUs (where the jobs' cost
    files say when they started)."""
    minutes, gpus = cost.elapsed(cost.with_split_columns(jobs))
    if minutes != minutes:
        return ""
    on = f" on {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" if gpus else ""
    return f" From the first job's start to the last one's end the run took {num(minutes)} minutes{on}."


def left_out(missing: list[str]) -> list[str]:
    """The header's list of the targets that the grid's ``exclude`` lists left out of this run."""
    if not missing:
        return []
    return [f"Not measured in this run (the grid's `exclude` lists): {', '.join(f'`{t}`' for t in missing)}.", ""]


def header(frames: dict[str, pd.DataFrame], grid: str, missing) -> list[str]:
    """The report's title, how to remake it, where its rows come from, and the summary."""
    return [
        "# lmperf report",
        "",
        f"Grid `{grid}`. Every number and every measured statement below is rendered from the CSVs under "
        "`results/`; nothing is typed by hand. Remake it with "
        f"`.venv/bin/snakemake --cores all --config grid={grid}`.",
        "",
        provenance(list(frames.values()), frames["cost"]),
        "",
        *left_out(list(missing)),
        summary.render(frames),
    ]


def index(measured: str) -> list[str]:
    """Where each of the handout's questions, and each study beyond it, is answered: a link to each
    heading that answers it, among the ``measured`` sections' headings (those of the studies this
    run's grid holds), or "not in this grid" where there is none. A section may still say that a
    part of it did not run here (on a CPU, the GPU-only parts)."""
    rendered = set(re.findall(r"^## (.+)$", measured, flags=re.MULTILINE))

    def where(places):
        found = [f"[{heading(p)}]({anchor(heading(p))})" for p in places if heading(p) in rendered]
        return ", ".join(found) or "not in this grid"

    rows = [f"| `{name}` | {asks} | {where(places)} |" for name, asks, places in HANDOUT]
    rows += [f"| {name} (beyond the handout) | {asks} | {where(places)} |" for name, asks, places in BEYOND_HANDOUT]
    return [
        "## Where each question is answered",
        "",
        "The handout's deliverables that ask for numbers, in its order, then what this report measures beyond it.",
        "",
        "| deliverable | what it asks | section |",
        "|---|---|---|",
        *rows,
        "",
    ]


def section(study, frames: dict[str, pd.DataFrame]) -> str:
    """A study's report section: its module's render() of the results it declares it reads."""
    module = importlib.import_module(f"lmperf.report.{study.section}")
    return module.render(*(frames[name] for name in study.reads))


def render(results: Path, grid: str, skip: tuple[str, ...] = (), missing: list[str] = ()) -> str:
    """The report: a header, the summary, an index of where each question is answered, then each
    study's section in lmperf.registry's order (a study the grid leaves out says so), reading
    results/<name>.csv for every result a section reads."""
    run = [study for study in sections() if study.name not in skip]
    frames = {name: read(results / f"{name}.csv") for study in run for name in study.reads}
    measured = {study.name: section(study, frames) for study in run}
    body = [measured[s.name] if s.name in measured else not_in_grid(s.title, s.optional) for s in sections()]
    return "\n".join(header(frames, grid, missing) + index("\n".join(measured.values())) + body)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default="results", type=Path)
    p.add_argument("--figures", default="report/figures", type=Path)
    p.add_argument("--grid", default="")
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=[study.name for study in STUDIES.values() if study.optional],
        help="a study left out of the grid",
    )
    only = p.add_mutually_exclusive_group()
    only.add_argument("--timing-only", action="store_true", help="only the e2e, warm-up and profiling sections")
    only.add_argument(
        "--memory-comm-only", action="store_true", help="only the memory, communication and data-parallel sections"
    )
    p.add_argument("--missing", action="append", default=[], help="a target the grid left out (repeatable)")
    p.add_argument("--out", default="report/final.md", type=Path)
    args = p.parse_args(argv)
    with atomic_path(args.out) as tmp:
        if args.timing_only:
            tmp.write_text(render_timing(args.results))
        elif args.memory_comm_only:
            tmp.write_text(render_memory_comm(args.results))
        else:
            tmp.write_text(render(args.results, args.grid, tuple(args.skip), args.missing))


if __name__ == "__main__":
    to_stderr()
    main()
