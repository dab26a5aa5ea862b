"""The report's "Communication" section: the all-reduce sweep (nccl-tests style) and the fit of
time = o + bytes/w to it, with the fits that were refused and why."""

import pandas as pd

from lmperf.measure.settings import setting
from lmperf.report.markdown import num, ok, table, time_unit


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{int(n)} B"


COLUMNS = ("bytes", "median_ms", "busbw_gbps")  # of each end of a sweep


def ends(rows: pd.DataFrame) -> pd.DataFrame:
    """Per backend and rank count, the smallest and the largest size's median and bus bandwidth."""
    out = []
    for (backend, world), group in rows.sort_values("bytes").groupby(["backend", "world_size"]):
        small, large = group.iloc[0], group.iloc[-1]
        out.append(
            {
                "backend": backend,
                "world_size": world,
                "device_name": group["device_name"].iloc[0],
                **{f"{end}_{k}": r[k] for end, r in (("small", small), ("large", large)) for k in COLUMNS},
            }
        )
    return pd.DataFrame(out)


def _not_run(allreduce: pd.DataFrame) -> list[str]:
    skipped = allreduce[allreduce["status"] != "ok"]
    if skipped.empty:
        return []
    return [
        "Not run: "
        + "; ".join(f"{r.backend} with {r.world_size} ranks ({r.note})" for r in skipped.itertuples())
        + ".",
        "",
    ]


def _sweep_table(rows: pd.DataFrame) -> list[str]:
    clocks = {"nccl": "CUDA events for NCCL on GPUs", "gloo": "the host clock for gloo on CPU ranks"}
    clock = "; ".join(clocks[b] for b in clocks if b in set(rows["backend"]))
    frame = pd.DataFrame(
        {
            "backend": rows["backend"],
            "ranks": rows["world_size"],
            "size": rows["bytes"].map(human_bytes),
            "median (ms)": [
                f"{num(m, 4)} [{num(lo, 4)}, {num(hi, 4)}]"
                for m, lo, hi in zip(rows["median_ms"], rows["ci95_low_ms"], rows["ci95_high_ms"])
            ],
            "min (ms)": rows["min_ms"].map(lambda x: num(x, 4)),
            "CV": rows["cv"].map(num),
            "algbw (GB/s)": rows["algbw_gbps"].map(num),
            "busbw (GB/s)": rows["busbw_gbps"].map(num),
        }
    )
    return [
        f"float32 tensors, as nccl-tests times them: per size {int(rows['warmup'].min())} warm-up all-reduces, then "
        f"{int(rows['iters'].min())} timed ones back to back ({clock}); "
        "an iteration's time is the slowest rank's. Median with its bootstrap 95% CI; bandwidths from the median; "
        "bus bandwidth = algorithm bandwidth × 2(n−1)/n.",
        "",
        table(frame),
        "",
    ]


def _end_lines(rows: pd.DataFrame) -> list[str]:
    out = []
    for r in ends(rows).itertuples():
        factor, unit = time_unit([r.small_median_ms, r.large_median_ms])
        digits = 1 if unit == "µs" else 3
        out.append(
            f"- {r.backend}, {r.world_size} ranks ({r.device_name}): {num(r.small_median_ms * factor, digits)} "
            f"{unit} at {human_bytes(r.small_bytes)} (busbw {num(r.small_busbw_gbps, 3)} GB/s) and "
            f"{num(r.large_median_ms * factor, digits)} {unit} at {human_bytes(r.large_bytes)} "
            f"(busbw {num(r.large_busbw_gbps)} GB/s)."
        )
    return out + ["", "![All-reduce bus bandwidth](figures/allreduce_busbw.png)", ""]


def _fit_table(fits: pd.DataFrame) -> list[str]:
    frame = pd.DataFrame(
        {
            "backend": fits["backend"],
            "ranks": fits["world_size"],
            "sizes": fits["sizes"],
            "range": [  # fits made before the range was recorded have none
                f"{human_bytes(lo)} – {human_bytes(hi)}" if lo == lo else "—"
                for lo, hi in zip(
                    *(fits.get(c, pd.Series(float("nan"), fits.index)) for c in ("min_bytes", "max_bytes"))
                )
            ],
            "o (µs)": fits["overhead_us"].map(lambda x: num(x, 1)),
            "w (GB/s)": fits["bandwidth_gbps"].map(num),
            "R²": fits["r2"].map(lambda x: num(x, 3)),
            "status": fits["status"],
            "reason": fits["note"].fillna(""),
        }
    )
    return [
        "### Fit of time = o + bytes / w",
        "",
        "Per backend and rank count, on the medians of the sizes in its range: the three decades below the largest "
        "(below them an all-reduce costs o plus launch jitter that no line describes; a range of — marks a fit made "
        "before ranges were recorded, over every size), minimizing relative error. A fit is "
        f"refused where it is not physical (o < 0) or does not describe the sizes (weighted R² < "
        f"{setting(fits, 'min_r2'):g}); "
        "`results/comm_fit.csv`.",
        "",
        table(frame),
        "",
    ]


def render(allreduce: pd.DataFrame, fits: pd.DataFrame) -> str:
    out = ["## Communication", "", "### All-reduce sweep", "", *_not_run(allreduce)]
    rows = ok(allreduce)
    if rows.empty:
        return "\n".join(out)
    rows = rows.sort_values(["backend", "world_size", "bytes"])
    out += _sweep_table(rows) + _end_lines(rows)
    return "\n".join(out if fits.empty else out + _fit_table(fits))
