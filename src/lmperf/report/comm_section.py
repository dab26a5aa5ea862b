"""The report's "Communication" section: the all-reduce sweep (nccl-tests style) and the fit of
time = o + bytes/w to it, with the fits that were refused and why."""

import pandas as pd

from lmperf.report.markdown import num, ok, table, time_unit


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{int(n)} B"


def render(allreduce: pd.DataFrame, fits: pd.DataFrame) -> str:
    out = ["## Communication", "", "### All-reduce sweep", ""]
    rows = ok(allreduce)
    skipped = allreduce[allreduce["status"] != "ok"]
    if len(skipped):
        out += [
            "Not run: "
            + "; ".join(f"{r.backend} with {r.world_size} ranks ({r.note})" for r in skipped.itertuples())
            + ".",
            "",
        ]
    if rows.empty:
        return "\n".join(out)
    rows = rows.sort_values(["backend", "world_size", "bytes"])
    clocks = {"nccl": "CUDA events for NCCL on GPUs", "gloo": "the host clock for gloo on CPU ranks"}
    clock = "; ".join(clocks[b] for b in clocks if b in set(rows["backend"]))
    out += [
        f"float32 tensors, as nccl-tests times them: per size {int(rows['warmup'].min())} warm-up all-reduces, then "
        f"{int(rows['iters'].min())} timed ones back to back ({clock}); "
        "an iteration's time is the slowest rank's. Median with its bootstrap 95% CI; bandwidths from the median; "
        "bus bandwidth = algorithm bandwidth × 2(n−1)/n.",
        "",
        table(
            pd.DataFrame(
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
        ),
        "",
    ]
    for (backend, world), group in rows.groupby(["backend", "world_size"]):
        small, large = group.iloc[0], group.iloc[-1]
        factor, unit = time_unit([small["median_ms"], large["median_ms"]])
        digits = 1 if unit == "µs" else 3
        out.append(
            f"- {backend}, {world} ranks ({group['device_name'].iloc[0]}): {num(small['median_ms'] * factor, digits)} "
            f"{unit} at {human_bytes(small['bytes'])} (busbw {num(small['busbw_gbps'], 3)} GB/s) and "
            f"{num(large['median_ms'] * factor, digits)} {unit} at {human_bytes(large['bytes'])} "
            f"(busbw {num(large['busbw_gbps'])} GB/s)."
        )
    out += ["", "![All-reduce bus bandwidth](figures/allreduce_busbw.png)", ""]
    if fits.empty:
        return "\n".join(out)
    out += [
        "### Fit of time = o + bytes / w",
        "",
        "Per backend and rank count, on the medians of the sizes in its range: the three decades below the largest "
        "(below them an all-reduce costs o plus launch jitter that no line describes; a range of — marks a fit made "
        "before ranges were recorded, over every size), minimizing relative error. A fit is "
        "refused where it is not physical (o < 0) or does not describe the sizes (weighted R² < 0.95); "
        "`results/comm_fit.csv`.",
        "",
        table(
            pd.DataFrame(
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
        ),
        "",
    ]
    return "\n".join(out)
