"""Does one profile job per size measure a point as one job per point did?

Ran at: 3295a76 (rows of cuts/profile, one NVIDIA H200); output: cuts/profile/compare.txt beside this.

    python compare_profile.py    (in this folder)

Pairs the point that cuts/profile/before/ profiled alone (small, train step, context 512) with the
same point of the eight-point job in cuts/profile/after/: instances and total time per range, the
kernels that take more than 1% of the step, and the two timing rows.
"""

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


if __name__ == "__main__":
    main()
