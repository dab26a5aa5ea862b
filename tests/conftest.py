import os

# Triton picks its interpreter at import time; without a GPU, its kernels run on the CPU through it.
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_FILES = ["Snakefile", "config.yaml", "workflow", "profiles", "src"]


def copy_pipeline(dest: Path) -> Path:
    """A fresh copy of the pipeline (code, rules, config) in which Snakemake can run."""
    for name in PIPELINE_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """Run the snakemake of this interpreter's environment in ``workdir``."""
    cmd = [sys.executable, "-m", "snakemake", *args]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The whole smoke pipeline, run once: `snakemake --cores 2 report/final.md` in a fresh copy."""
    workdir = copy_pipeline(tmp_path_factory.mktemp("pipeline"))
    snakemake(workdir, "--cores", "2", "report/final.md", "--config", "grid=smoke")
    return workdir
