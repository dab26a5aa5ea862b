"""Nsight Systems: run a command under ``nsys profile`` and read three of its ``nsys stats`` CSV reports.

- ``cuda_gpu_trace``: every kernel, memcpy and memset on the GPU (start, duration, correlation id, name);
- ``cuda_api_trace``: every CUDA API call on the host (start, correlation id), among them the launches;
- ``nvtx_pushpop_trace``: every NVTX push/pop range (start, end, name).

A GPU activity is joined to the API call that launched it by correlation id, and so gets the host
time of its launch, which places it among the NVTX ranges (lmperf.measure.kernels). No GUI, no
sqlite queries of our own: ``nsys stats`` is Nsight's supported way to read a report.
"""

import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import pandas as pd

REPORTS = ("cuda_gpu_trace", "cuda_api_trace", "nvtx_pushpop_trace")


def executable() -> str | None:
    return shutil.which("nsys")


@cache
def supports_autograd_nvtx(nsys: str) -> bool:
    """Whether this nsys has ``--pytorch=autograd-nvtx`` (per-operator ranges from PyTorch)."""
    help_text = subprocess.run([nsys, "profile", "--help"], capture_output=True, text=True).stdout
    return "autograd-nvtx" in help_text


def profile_command(nsys: str, report: Path, command: list[str], operator_ranges: bool = False) -> list[str]:
    """``nsys profile`` tracing CUDA and NVTX only (no CPU sampling, no context switches).

    ``operator_ranges`` adds a range per PyTorch operator (``--pytorch=autograd-nvtx``, where this
    nsys has it), for reading the report in the Nsight GUI. The kernel tables do not use them (they are
    cut at lmperf's named ranges), and they make the report slower to write.
    """
    options = [
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        f"--output={report.with_suffix('')}",
    ]
    if operator_ranges and supports_autograd_nvtx(nsys):
        options.append("--pytorch=autograd-nvtx")
    return [nsys, "profile", *options, *command]


def read_report(nsys: str, report: Path) -> tuple[pd.DataFrame, list[tuple[str, float, float]]]:
    """``nsys stats`` of REPORTS, read by read_stats. Its CSVs go to a temporary folder and the
    SQLite export it makes beside the report is removed, also when this is interrupted: they are
    large (hundreds of MB for a big train step) and the pipeline keeps only the kernel table."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "stats"
        try:
            subprocess.run(
                [
                    nsys,
                    "stats",
                    "--report",
                    ",".join(REPORTS),
                    "--format",
                    "csv",
                    "--force-export=true",
                    "--force-overwrite=true",
                    "--output",
                    str(prefix),
                    str(report),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            return read_stats({name: Path(f"{prefix}_{name}.csv") for name in REPORTS})
        finally:
            report.with_suffix(".sqlite").unlink(missing_ok=True)


def _read(path: Path) -> pd.DataFrame:
    """A stats CSV with its columns named plainly: 'Start (ns)' -> 'start', 'CorrID' -> 'corrid'."""
    if not path.exists():
        return pd.DataFrame()
    frame = pd.read_csv(path)
    frame.columns = [re.sub(r"\s*\(.*\)$", "", c).strip().lower() for c in frame.columns]
    return frame


def read_stats(paths: dict[str, Path]) -> tuple[pd.DataFrame, list[tuple[str, float, float]]]:
    """GPU activities with their launch times, and the NVTX ranges, all in µs.

    Returns a frame with columns launch, start, end (µs) and name, one row per GPU activity whose
    launching API call is in the trace, and (name, start, end) for each NVTX push/pop range.
    """
    gpu, api, nvtx = (_read(paths[name]) for name in REPORTS)
    if gpu.empty:
        return pd.DataFrame(columns=["launch", "start", "end", "name"]), []
    launch = api.set_index("corrid")["start"] if not api.empty else pd.Series(dtype=float)
    gpu = gpu[gpu["corrid"].isin(launch.index)]
    activities = pd.DataFrame(
        {
            "launch": gpu["corrid"].map(launch).to_numpy() / 1e3,
            "start": gpu["start"].to_numpy() / 1e3,
            "end": (gpu["start"] + gpu["duration"]).to_numpy() / 1e3,
            "name": gpu["name"].astype(str).to_numpy(),
        }
    )
    ranges = list(zip(nvtx["name"].map(range_name), nvtx["start"] / 1e3, nvtx["end"] / 1e3)) if not nvtx.empty else []
    return activities, ranges


def range_name(reported: str) -> str:
    """The range's own name: nsys writes '<domain>:<message>' (':forward' in the default domain), and
    PyTorch's autograd-nvtx ranges end in ', op_id = N'."""
    name = re.sub(r"^[^:]*:(?!:)", "", str(reported))
    return re.sub(r", (op_id|seq) = .*$", "", name)
