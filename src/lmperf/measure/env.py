"""The environment fingerprint that every result row carries, so a number can be traced to a machine."""

import functools
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[3]


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def git_commit() -> str:
    """HEAD of the checkout the code runs from, with '-dirty' when tracked files differ from it.

    A copy of the tree without .git (a cluster node, a GPU machine the tree was copied to) takes it from $LMPERF_COMMIT.
    """
    if os.environ.get("LMPERF_COMMIT"):
        return os.environ["LMPERF_COMMIT"]
    commit = _run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT)
    if commit and _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT):
        commit += "-dirty"
    return commit


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name ("AMD EPYC 7B13"), as Linux's /proc/cpuinfo or macOS's sysctl names it;
    the architecture ("x86_64") only where neither says more."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        named = _run(["sysctl", "-n", "machdep.cpu.brand_string"])
        if named:
            return named
    return platform.processor() or platform.machine() or "cpu"


def device_name(device: torch.device) -> str:
    """The device's model: the GPU's name, or the CPU's."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


@functools.cache
def _static_fingerprint() -> dict[str, str]:
    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "triton_version": _version("triton"),
        "driver_version": _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0],
        "python_version": platform.python_version(),
        "host": socket.gethostname(),
        "commit": git_commit(),
    }


def fingerprint(device: torch.device) -> dict[str, str]:
    """device, torch/CUDA/Triton/driver/Python versions, host and commit, as strings."""
    return {"device_name": device_name(device), "device_type": device.type, **_static_fingerprint()}
