import os
from collections import Counter

# Triton picks its interpreter at import time; without a GPU, its kernels run on the CPU through it.
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The pipeline's jobs compile into the run's own cache (.cache/compile/) unless the environment names
# one; every test copies the pipeline afresh, so the tests name the machine's usual caches instead,
# shared by all their runs: a cold cache costs a smoke compiled job about 20 s.
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", os.path.join("/tmp", f"torchinductor_{os.environ.get('USER', 'lmperf')}")
)
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".triton", "cache"))

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_FILES = ["Snakefile", "config.yaml", "workflow", "profiles", "scripts", "src"]


def copy_pipeline(dest: Path) -> Path:
    """A fresh copy of the pipeline (code, rules, config) in which Snakemake can run."""
    for name in PIPELINE_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def snakemake(
    workdir: Path, *args: str, timeout: float = 900, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run the snakemake of this interpreter's environment in ``workdir`` (``env``: extra variables)."""
    cmd = [sys.executable, "-m", "snakemake", *args]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""), **(env or {})}
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The whole smoke pipeline, run once: `snakemake --cores 2 report/final.md` in a fresh copy.

    Every Python process of the run records the lmperf modules it imported under imports/
    (tests/record_imports), for the check of rule inputs against what ran."""
    workdir = copy_pipeline(tmp_path_factory.mktemp("pipeline"))
    snakemake(workdir, "--cores", "2", "report/final.md", "--config", "grid=smoke", env=import_recorder(workdir))
    return workdir


def import_recorder(workdir: Path) -> dict:
    """Environment under which every Python process records what it imported to workdir/imports/."""
    (workdir / "imports").mkdir(exist_ok=True)
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests/record_imports"), os.environ.get("PYTHONPATH")])),
        "LMPERF_IMPORT_LOG": str(workdir / "imports"),
    }


def job_holder(pattern: str, held: Path) -> dict:
    """Environment under which the job whose --out matches the glob ``pattern`` waits, before any work,
    until it is killed; it writes a file to ``held`` when it starts waiting (tests/hold_jobs)."""
    held.mkdir(parents=True, exist_ok=True)
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests/hold_jobs"), os.environ.get("PYTHONPATH")])),
        "LMPERF_HOLD": pattern,
        "LMPERF_HOLD_DIR": str(held),
    }


def recorded_processes(workdir: Path) -> list[tuple[str, list[str], list[str]]]:
    """(entry module, lmperf files imported, argv) of every process recorded under workdir/imports/."""
    processes = []
    for log in (workdir / "imports").glob("*.txt"):
        head, argv = log.read_text().split("\n--argv\n")
        entry, *files = head.split()
        processes.append((entry, files, argv.split()))
    return processes


def dry_run(workdir, *args) -> dict[str, int]:
    """Rule -> job count of a dry run of report/final.md; {} when nothing is to be done."""
    return dict(Counter(job["rule"] for job in dry_run_jobs(workdir, *args)))


def dry_run_jobs(workdir, *args) -> list[dict]:
    """Every job of a dry run (`-n -p`), as {rule, input, output, benchmark, reason, resources, priority, shell};
    [] when nothing is to be done."""
    proc = snakemake(workdir, "-n", "-p", "report/final.md", "--nolock", *args)
    jobs = []
    for block in re.split(r"^(?:local)?rule (?=\w+:$)", proc.stdout + proc.stderr, flags=re.M)[1:]:
        job = {"rule": block.split(":", 1)[0]}
        for key in ("input", "output", "benchmark", "reason", "resources", "priority"):
            found = re.search(rf"^    {key}: (.*)$", block, flags=re.M)
            job[key] = found.group(1) if found else ""
        shell = re.search(r"^Shell command: (.*)$", block, flags=re.M)
        job["shell"] = shell.group(1) if shell else ""
        jobs.append(job)
    return jobs


def clone_run(smoke_run, tmp_path):
    """A copy of the finished smoke run (mtimes and .snakemake metadata kept) to edit freely."""
    dest = tmp_path / "run"
    shutil.copytree(smoke_run, dest, symlinks=True)
    return dest


def touch_source(path):
    """Edit a source file (a comment), as a developer would; its mtime moves past every output."""
    with open(path, "a") as f:
        f.write("\n# edited by a test\n")
    later = time.time() + 5
    os.utime(path, (later, later))


def markdown_tables(text: str, after: str) -> list[list[str]]:
    """Body rows (cells stripped) of the first Markdown table after the line ``after``."""
    lines = text.split(after, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def table_cells(row: str) -> list[str]:
    """The cells of a Markdown table row as GFM splits it: at every pipe not escaped by a backslash."""
    row = row.strip().removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]


def table_problems(text: str, width: int = 200) -> list[str]:
    """What keeps the Markdown's tables from reading right, as GFM (markdown-it-py) renders them: a
    line that starts like a table row but is in no table, a row whose cells are not its header's, a
    row wider than ``width`` characters. Empty when every table renders and fits a screen."""
    from markdown_it import MarkdownIt

    lines = text.splitlines()
    tabled, problems = set(), []
    for token in MarkdownIt("commonmark").enable("table").parse(text):  # GFM tables
        if token.type != "table_open":
            continue
        start, end = token.map
        tabled.update(range(start, end))
        header = table_cells(lines[start])
        for n in range(start, end):
            if len(table_cells(lines[n])) != len(header):
                problems.append(f"line {n + 1}: {len(table_cells(lines[n]))} cells under {len(header)}: {lines[n]}")
            if len(lines[n]) > width:
                problems.append(f"line {n + 1}: {len(lines[n])} characters wide: {lines[n][:80]}…")
    for n, line in enumerate(lines):
        if line.lstrip().startswith("|") and n not in tabled:
            problems.append(f"line {n + 1}: not in any table GFM renders: {line}")
    return problems
