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

    python -m lmperf.distributed.bucket_model --allreduce results/allreduce.csv --out results/comm_fit.csv
"""

import argparse
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from lmperf.distributed.ddp import bucketed_settings, make_buckets
from lmperf.measure.rows import write_csv_atomic

MIN_R2 = 0.95
FIT_SPAN = 1024  # a 1 GiB sweep is fitted from 1 MiB up: DDP's buckets and the XL model's big tensors
FIT_COLUMNS = [
    "backend",
    "world_size",
    "overhead_us",
    "bandwidth_gbps",
    "r2",
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


def serial_exposed(ready_s: list[float], sizes: list[int], backward_s: float, cost: Cost) -> float:
    """Seconds from the end of backward until the last of these all-reduces ends, each started when
    its bucket is ready and the previous one has ended."""
    end = 0.0
    for ready, nbytes in zip(ready_s, sizes):
        end = max(end, ready) + cost(nbytes)
    return max(0.0, end - backward_s)


def predict_exposed(variant: str, parameter_bytes: list[int], backward_s: float, cost: Cost) -> float:
    """Predicted exposed communication (seconds) of a DDP variant (lmperf.studies.ddp's names)."""
    total = sum(parameter_bytes)
    if variant == "naive":  # one blocking all-reduce per parameter, all after backward
        return sum(cost(n) for n in parameter_bytes)
    if variant == "flat":  # one all-reduce of everything after backward
        return cost(total)
    if variant == "individual":
        bucket_mb, comm_dtype = 0.0, None
    elif variant.startswith("bucketed-"):
        bucket_mb, comm_dtype = bucketed_settings(variant)
    else:
        raise ValueError(f"no model for variant {variant!r}")
    sizes = bucket_bytes(parameter_bytes, bucket_mb)
    done, ready = 0, []
    for nbytes in sizes:  # reverse order: backward makes the last parameters' gradients first
        done += nbytes
        ready.append(backward_s * done / total)
    wire = comm_dtype.itemsize / 4 if comm_dtype is not None else 1.0  # fp32 gradients, sent as comm_dtype
    return serial_exposed(ready, [round(n * wire) for n in sizes], backward_s, cost)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--allreduce", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    fits = fit_allreduce(pd.read_csv(args.allreduce))
    write_csv_atomic(fits, args.out)
    print(fits.to_string(), flush=True)


if __name__ == "__main__":
    main()
