"""Does one profile job per size measure a point as one job per point did? And do the kernel tables
change without nsys's per-operator ranges?

    python compare_profile.py           (in this folder) -> cuts/profile/compare.txt
    python compare_profile.py ranges    -> cuts/ranges/compare.txt

The first (rows of cuts/profile at 3295a76, one NVIDIA H200) pairs the point that cuts/profile/before/
profiled alone (small, train step, context 512) with the same point of the eight-point job in
cuts/profile/after/: instances and total time per range, the kernels that take more than 1% of the
step, and the two timing rows. The second (cuts/ranges at d9d4920, one NVIDIA H200) pairs every point
of the large job run with per-operator ranges (with/) and without (without/) the same way.
"""

import sys
from pathlib import Path

import pandas as pd

CUT = Path(__file__).parent / "cuts/profile"
POINT = {"mode": "train_step", "context_length": 512}


def point(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["mode"] == POINT["mode"]) & (frame["context_length"] == POINT["context_length"])]


def main():
    alone = point(pd.read_csv(CUT / "before/rows/profile/small/train_step-ctx512.csv"))
    batched = point(pd.read_csv(CUT / "after/rows/profile/small.csv"))
    by_range = (
        alone.groupby("range")[["instances", "total_ms"]]
        .sum()
        .join(batched.groupby("range")[["instances", "total_ms"]].sum(), lsuffix="_alone", rsuffix="_batched")
    )
    by_range["ratio"] = by_range["total_ms_batched"] / by_range["total_ms_alone"]
    kernels = alone.set_index(["range", "kernel"])["total_ms"].to_frame("alone_ms")
    kernels["batched_ms"] = batched.set_index(["range", "kernel"])["total_ms"]
    kernels["ratio"] = kernels["batched_ms"] / kernels["alone_ms"]
    big = kernels[kernels["alone_ms"] > 0.01 * kernels["alone_ms"].sum()]
    timing = pd.concat(
        [
            point(pd.read_csv(CUT / "before/rows/profile/small/train_step-ctx512-timing.csv")).assign(job="alone"),
            point(pd.read_csv(CUT / "after/rows/profile/small-timing.csv")).assign(job="batched"),
        ]
    )[["job", "step_ms", "profiled_step_ms", "kernel_forward_ms", "profiler_forward_ms"]]
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(by_range.to_string(float_format=lambda x: f"{x:.4f}"))
        for label, rows in (
            (f"\nkernels above 1% of the step: {len(big)}", big),
            (f"all {len(kernels)} kernels", kernels),
        ):
            print(f"{label}; batched / alone {rows['ratio'].min():.4f}-{rows['ratio'].max():.4f}")
        print()
        print(timing.to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def ranges():
    rows = {side: Path(__file__).parent / f"cuts/ranges/{side}/rows/profile" for side in ("without", "with")}
    point_ = ["context_length", "mode"]
    tables = {side: pd.read_csv(path / "large.csv") for side, path in rows.items()}
    by_range = (
        tables["with"]
        .groupby([*point_, "range"])[["instances", "total_ms"]]
        .sum()
        .join(tables["without"].groupby([*point_, "range"])[["instances", "total_ms"]].sum(), rsuffix="_without")
    )
    by_range["ratio"] = by_range["total_ms_without"] / by_range["total_ms"]
    kernels = tables["with"].set_index([*point_, "range", "kernel"])["total_ms"].to_frame("with_ms")
    kernels["without_ms"] = tables["without"].set_index([*point_, "range", "kernel"])["total_ms"]
    kernels["ratio"] = kernels["without_ms"] / kernels["with_ms"]
    in_range = kernels["with_ms"].groupby(level=[0, 1, 2]).transform("sum")
    big = kernels[kernels["with_ms"] > 0.01 * in_range]
    timing = {side: pd.read_csv(path / "large-timing.csv").set_index(point_) for side, path in rows.items()}
    columns = ["step_ms", "profiled_step_ms", "kernel_forward_ms", "profiler_forward_ms"]
    steps = timing["with"][columns].join(timing["without"][columns], lsuffix="_with", rsuffix="_without")
    same = (by_range["instances"] == by_range["instances_without"]).sum()
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(by_range.to_string(float_format=lambda x: f"{x:.4f}"))
        print(f"\nranges with equal instances: {same} of {len(by_range)}")
        print(f"total time per range, without / with: {by_range['ratio'].min():.4f}-{by_range['ratio'].max():.4f}")
        print(
            f"kernels above 1% of their range: {len(big)}; without / with {big['ratio'].min():.4f}-"
            f"{big['ratio'].max():.4f}; all {len(kernels)}: {kernels['ratio'].min():.4f}-{kernels['ratio'].max():.4f}"
        )
        print()
        print(steps.to_string(float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["ranges"]):
        sys.exit(f"usage: python compare_profile.py [ranges]; got {' '.join(sys.argv[1:])}")
    ranges() if sys.argv[1:] == ["ranges"] else main()
