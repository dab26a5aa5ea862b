"""A cost model of data-parallel gradient synchronization, fitted from the all-reduce sweep.

An all-reduce of b bytes takes o + b / w: a fixed per-call overhead o and an algorithm bandwidth
w, fitted to the sweep's medians (``fit_allreduce``). The fit covers the sizes within a factor
FIT_SPAN (three decades) of the largest: there the smallest sizes pin o and the largest pin w.
Further down, an all-reduce costs o plus launch and synchronization jitter that no line
describes (on 2 H200s a 16 KiB median of 71 µs sat between 1 KiB and 1 MiB ones of 36 µs).
The fit minimizes relative error (weights 1/t²), and it is refused, with the reason, where it is
not physical (o < 0) or does not describe the data (weighted R² < MIN_R2). Each fit states the
range it covers.

From a cost per all-reduce, the exposed communication of each DDP variant (the time it adds to a
step beyond compute) is predicted at parameter granularity (``predict_exposed``). The cost is the
fitted o + b / w (``fitted_cost``); where the fit is refused, the sweep's own medians, interpolated
linearly in bytes between the measured sizes (``swept_cost``), so the model still runs and says
which cost it used. Buckets are formed exactly as DDPBucketed forms them
(``lmperf.distributed.ddp.make_buckets``, reverse parameter order); backward produces gradient
bytes at a steady rate over the measured backward time, so a bucket is ready when its last
parameter's gradient is; all-reduces run one after another on one stream. A bucket all-reduced in
bf16 (``bucketed-<MB>-bf16``) carries half its fp32 bytes.

Compute and NCCL share the GPU's SMs, so a backward beside all-reduces runs slower than alone.
``fit_contention`` measures that slowdown per byte in flight on the machine itself, from one
overlapping variant's backward against local's (no communication), and
``predict_exposed(..., contention=...)`` slows the backward by it for every byte all-reduced while
it runs; where the rows cannot give it, the fit is refused with the reason.

    python -m lmperf.distributed.bucket_model --allreduce results/allreduce.csv --out results/comm_fit.csv
"""

import argparse
import logging
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from lmperf.distributed.ddp import bucketed_settings, make_buckets
from lmperf.log import to_stderr
from lmperf.measure.env import git_commit
from lmperf.measure.rows import write_csv_atomic

log = logging.getLogger(__name__)

MIN_R2 = 0.95
FIT_SPAN = 1024  # a 1 GiB sweep is fitted from 1 MiB up: DDP's buckets and the XL model's big tensors
FIT_COLUMNS = [
    "backend",
    "world_size",
    "overhead_us",
    "bandwidth_gbps",
    "r2",
    "min_r2",
    "sizes",
    "min_bytes",
    "max_bytes",
    "status",
    "note",
]


def fit_overhead_bandwidth(nbytes, seconds) -> tuple[float, float, float]:
    """Fit seconds = o + nbytes / w minimizing relative residuals; returns (o s, w bytes/s, weighted R²)."""
    x, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    weights = 1 / t**2
    design = np.stack([np.ones_like(x), x], axis=1)
    sw = np.sqrt(weights)
    (o, slope), *_ = np.linalg.lstsq(design * sw[:, None], t * sw, rcond=None)
    residual = t - (o + slope * x)
    mean = np.sum(weights * t) / np.sum(weights)
    r2 = 1 - np.sum(weights * residual**2) / np.sum(weights * (t - mean) ** 2)
    return float(o), float(1 / slope) if slope > 0 else float("inf"), float(r2)


def fit_allreduce(allreduce: pd.DataFrame) -> pd.DataFrame:
    """One fit per (backend, world size) on the median times of the sizes within
    FIT_SPAN of the largest;
    status 'ok' or 'refused' with the reason."""
    rows = []
    measured = allreduce[allreduce["status"] == "ok"]
    for (backend, world), group in measured.groupby(["backend", "world_size"]):
        group = group[group["bytes"] >= group["bytes"].max() / FIT_SPAN]
        row = {
            "backend": backend,
            "world_size": int(world),
            "sizes": int(group["bytes"].nunique()),
            "min_bytes": int(group["bytes"].min()),
            "max_bytes": int(group["bytes"].max()),
            "min_r2": MIN_R2,  # the report states the acceptance it read from the rows
        }
        if row["sizes"] < 3:
            rows.append(
                {**row, "status": "refused", "note": f"{row['sizes']} sizes: a line through them proves nothing"}
            )
            continue
        o, w, r2 = fit_overhead_bandwidth(group["bytes"], group["median_ms"] / 1e3)
        row.update(overhead_us=o * 1e6, bandwidth_gbps=w / 1e9, r2=r2, status="ok", note="")
        if o < 0:
            row.update(status="refused", note=f"negative per-call overhead ({o * 1e6:.1f} µs): not physical")
        elif not w > 0 or not np.isfinite(w):
            row.update(status="refused", note="time does not grow with size: no bandwidth to fit")
        elif r2 < MIN_R2:
            row.update(status="refused", note=f"R² {r2:.3f} < {MIN_R2}: o + bytes/w does not describe these sizes")
        rows.append(row)
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def bucket_bytes(parameter_bytes: list[int], bucket_size_mb: float | None) -> list[int]:
    """Bytes per bucket, formed by make_buckets from parameters of these sizes (in parameter order)."""
    stand_ins = [torch.empty(n, dtype=torch.uint8, device="meta") for n in parameter_bytes]  # sizes, no memory
    return [sum(p.nbytes for p in bucket) for bucket in make_buckets(stand_ins, bucket_size_mb)]


Cost = Callable[[int], float]  # seconds of one all-reduce of this many bytes


def fitted_cost(o: float, w: float) -> Cost:
    """o + bytes / w: the fitted line (o in seconds, w in bytes per second)."""
    return lambda nbytes: o + nbytes / w


def swept_cost(nbytes, seconds) -> Cost:
    """The measured medians, interpolated linearly in bytes: the smallest size's time below it (the
    latency floor), the two largest sizes' slope past the largest (one all-reduce of every gradient
    can be larger than the sweep)."""
    order = np.argsort(np.asarray(nbytes, dtype=float))
    x, t = np.asarray(nbytes, dtype=float)[order], np.asarray(seconds, dtype=float)[order]
    slope = (t[-1] - t[-2]) / (x[-1] - x[-2])
    return lambda n: float(np.interp(n, x, t)) + max(0.0, n - x[-1]) * slope


def schedule(
    ready: list[float], sizes: list[int], backward_s: float, stretched: float, cost: Cost
) -> tuple[float, int]:
    """All-reduces one after another, each started when its bucket is ready and the previous one has
    ended, in a backward of ``stretched`` seconds (``ready``: seconds into one of ``backward_s``, so
    scaled in proportion): when the last ends, and the bytes of those that start inside the backward
    (an all-reduce that starts inside it counts whole)."""
    end, in_flight = 0.0, 0
    for when, nbytes in zip(ready, sizes):
        start = max(end, when * stretched / backward_s)
        in_flight += nbytes if start < stretched else 0
        end = start + cost(nbytes)
    return end, in_flight


def contended_backward(
    ready: list[float], sizes: list[int], backward_s: float, cost: Cost, contention: float
) -> tuple[float, float]:
    """The backward slowed by ``contention`` seconds per byte of the all-reduces that start before it
    ends (compute and NCCL share the GPU), and when the last all-reduce ends. The slower backward makes
    buckets ready later, in proportion, and lets more all-reduces start inside it: iterated to its
    fixed point (the backward only grows, by whole all-reduces, so within one pass per all-reduce)."""
    stretched = backward_s
    for _ in range(len(sizes) + 1):
        end, in_flight = schedule(ready, sizes, backward_s, stretched, cost)
        longer = backward_s + contention * in_flight
        if longer == stretched:
            break
        stretched = longer
    return stretched, end


def contended_exposed(ready: list[float], sizes: list[int], backward_s: float, cost: Cost, contention: float) -> float:
    """Seconds from the end of backward until the last all-reduce ends (``contended_backward``),
    measured from the backward's time alone, as step − local measures it."""
    return max(0.0, contended_backward(ready, sizes, backward_s, cost, contention)[1] - backward_s)


def overlapped_schedule(variant: str, parameter_bytes: list[int], backward_s: float) -> tuple[list[float], list[int]]:
    """When each all-reduce of an overlapping variant (``individual``, ``bucketed-*``) is ready, in
    seconds into the backward, and the bytes it carries on the wire."""
    if variant == "individual":
        bucket_mb, comm_dtype = 0.0, None
    elif variant.startswith("bucketed-"):
        bucket_mb, comm_dtype = bucketed_settings(variant)
    else:
        raise ValueError(f"no model for variant {variant!r}")
    sizes = bucket_bytes(parameter_bytes, bucket_mb)
    total, done, ready = sum(parameter_bytes), 0, []
    for nbytes in sizes:  # reverse order: backward makes the last parameters' gradients first
        done += nbytes
        ready.append(backward_s * done / total)
    wire = comm_dtype.itemsize / 4 if comm_dtype is not None else 1.0  # fp32 gradients, sent as comm_dtype
    return ready, [round(n * wire) for n in sizes]


def predict_exposed(
    variant: str, parameter_bytes: list[int], backward_s: float, cost: Cost, contention: float = 0.0
) -> float:
    """Predicted exposed communication (seconds) of a DDP variant (lmperf.studies.ddp's names); with
    ``contention`` (``fit_contention``), the overlapping variants' backward slows per byte in flight."""
    if variant == "naive":  # one blocking all-reduce per parameter, all after backward
        return sum(cost(n) for n in parameter_bytes)
    if variant == "flat":  # one all-reduce of everything after backward
        return cost(sum(parameter_bytes))
    ready, sizes = overlapped_schedule(variant, parameter_bytes, backward_s)
    return contended_exposed(ready, sizes, backward_s, cost, contention)


def fit_contention(slowdown_s: float, variant: str, parameter_bytes: list[int], backward_s: float, cost: Cost) -> dict:
    """The backward's slowdown per byte in flight, from one overlapping variant's measured backward
    against the backward with no communication (``slowdown_s``: both medians over many steps, timed
    with CUDA events in the same run, on the machine the prediction is for): the slowdown over the
    bytes that variant all-reduces while its slowed backward runs, in the model's schedule of it.
    Returns status 'ok' with ``seconds_per_byte``, or 'refused' with the reason in ``note``.

    Why from the steps and not from a kernel trace: one traced step of an overlapping variant ran
    up to 17% longer than untraced (notes/ddp-overlap.md), more than the slowdown to be fitted."""

    def refused(note: str) -> dict:
        return {"status": "refused", "note": note, "seconds_per_byte": float("nan"), "variant": variant}

    if not np.isfinite(slowdown_s):
        return refused(f"no backward time of {variant}, or of local, to compare")
    if slowdown_s <= 0:
        return refused(f"{variant}'s backward no slower than local's: no contention to fit")
    ready, sizes = overlapped_schedule(variant, parameter_bytes, backward_s)
    # the bytes in flight in the backward as measured, stretched by the slowdown: so the model, given
    # this contention, slows that variant's backward by just the slowdown measured
    _, in_flight = schedule(ready, sizes, backward_s, backward_s + slowdown_s, cost)
    if in_flight == 0:
        return refused(f"no all-reduce of {variant} starts inside its backward")
    return {
        "status": "ok",
        "note": "",
        "seconds_per_byte": slowdown_s / in_flight,
        "slowdown_ms": slowdown_s * 1e3,
        "bytes_in_flight": in_flight,
        "variant": variant,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--allreduce", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    fits = fit_allreduce(pd.read_csv(args.allreduce)).assign(commit=git_commit())  # the code that fitted them
    write_csv_atomic(fits, args.out)
    log.info(f"all-reduce time fitted per backend and world size:\n{fits.to_string()}")


if __name__ == "__main__":
    to_stderr()
    main()
