# Helpers shared by every study: the grid in force, code dependencies, wildcard constraints.
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys


def gpu_visible():
    """Is a CUDA GPU visible? Decided without importing torch, so building the DAG stays fast."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    if shutil.which("nvidia-smi"):
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return "GPU" in listing
    return False


GRID_NAME = config["grid"] if config["grid"] != "auto" else ("full" if gpu_visible() else "smoke")
GRID = config["grids"][GRID_NAME]
E2E = GRID["e2e"]
WARMUP = GRID["warmup"]

# Jobs run `python -m lmperf...` with the interpreter that runs Snakemake and the package from src/,
# installed or not.
PYTHON = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath("src"), os.environ.get("PYTHONPATH")]))


def code(*parts):
    """Source files a target depends on: package subfolders ('model') or files ('studies/e2e.py')."""
    files = []
    for part in parts:
        path = os.path.join("src/lmperf", part)
        files += sorted(glob.glob(os.path.join(path, "*.py"))) if os.path.isdir(path) else [path]
    return files


def excluding(targets, patterns):
    """The targets less those matching a glob of a grid's ``exclude`` (e.g. results/profile/xl/*)."""
    return [t for t in targets if not any(fnmatch.fnmatch(t, pattern) for pattern in patterns)]


def alternatives(values):
    return "|".join(re.escape(str(v)) for v in values)


wildcard_constraints:
    size=alternatives(set(E2E["sizes"]) | set(WARMUP["sizes"])),
    precision="fp32|bf16",
    compile="eager|compiled",
    mode="forward|forward_backward|train_step",
    warmup=r"\d+",
    process=r"\d+",
