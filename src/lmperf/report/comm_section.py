"""The report's "Communication" section: the all-reduce sweep and the bucket-size model fitted to it."""

import pandas as pd

from lmperf.distributed.bucket_model import ddp_overhead, fit_overhead_bandwidth, optimal_bucket_bytes
from lmperf.model import TransformerLM, count_parameters, model_config
from lmperf.report.markdown import num, ok, table

BUCKETS_MB = (1, 10, 100, 1000)


def xl_gradient_bytes() -> int:
    """fp32 gradient bytes of the XL model, counted on a meta-device instance (no memory used)."""
    return 4 * count_parameters(TransformerLM(model_config("xl", 128), device="meta"))


def fits(rows: pd.DataFrame) -> pd.DataFrame:
    """(o, w) per backend and world size, from time = o + bytes / w over the swept sizes."""
    out = []
    for (backend, world), group in rows.groupby(["backend", "world_size"]):
        if group["bytes"].nunique() >= 2:
            o, w = fit_overhead_bandwidth(group["bytes"], group["mean_ms"] / 1e3)
            out.append({"backend": backend, "world_size": world, "o_s": o, "w_bytes_per_s": w})
    return pd.DataFrame(out)


def render(allreduce: pd.DataFrame) -> str:
    out = ["## Communication", "", "### All-reduce sweep", ""]
    rows = ok(allreduce)
    skipped = allreduce[allreduce["status"] != "ok"]
    if len(skipped):
        out += ["Not run: " + "; ".join(f"{r.backend} with {r.world_size} ranks ({r.note})" for r in skipped.itertuples()) + ".", ""]
    if rows.empty:
        return "\n".join(out)
    rows = rows.sort_values(["backend", "world_size", "size_mb"])
    out += [
        f"float32 tensors, {int(rows['warmup'].iloc[0])} warm-up and {int(rows['iters'].iloc[0])} timed all-reduces per size; "
        "each iteration's time is the slowest rank's. Bus bandwidth = algorithm bandwidth × 2(n−1)/n.", "",
        table(pd.DataFrame({
            "backend": rows["backend"], "device": rows["device_name"], "ranks": rows["world_size"],
            "size (MB)": rows["size_mb"].map(lambda x: num(x, 0)), "mean (ms)": rows["mean_ms"].map(lambda x: num(x, 3)),
            "std (ms)": rows["std_ms"].map(lambda x: num(x, 3)), "algbw (GB/s)": rows["algbw_gbps"].map(num),
            "busbw (GB/s)": rows["busbw_gbps"].map(num),
        })), "",
    ]
    for (backend, world), group in rows.groupby(["backend", "world_size"]):
        small, large = group.iloc[0], group.iloc[-1]
        gain = large["busbw_gbps"] / small["busbw_gbps"]
        verdict = ("small messages are latency-bound" if gain >= 1.5 else "bandwidth is flat across sizes")
        out.append(f"- {backend}, {world} ranks: bus bandwidth {num(small['busbw_gbps'])} GB/s at {num(small['size_mb'], 0)} MB and "
                   f"{num(large['busbw_gbps'])} GB/s at {num(large['size_mb'], 0)} MB (×{num(gain)}): {verdict}.")
    out += ["", "![All-reduce bus bandwidth](figures/allreduce_busbw.png)", ""]

    fitted = fits(rows)
    if fitted.empty:
        return "\n".join(out)
    out += ["### A model of bucketed DDP", "",
            "Fitting time = o + bytes / w to each sweep gives the per-call overhead o and bandwidth w:", "",
            table(pd.DataFrame({"backend": fitted["backend"], "ranks": fitted["world_size"],
                                "o (µs)": (fitted["o_s"] * 1e6).map(lambda x: num(x, 1)),
                                "w (GB/s)": (fitted["w_bytes_per_s"] / 1e9).map(num)})), ""]
    preferred = fitted.sort_values(["backend", "world_size"], key=lambda c: c.map({"nccl": 0, "gloo": 1}) if c.name == "backend" else c)
    pick = preferred.iloc[0]
    o, w, s = max(pick["o_s"], 0.0), pick["w_bytes_per_s"], xl_gradient_bytes()
    best = optimal_bucket_bytes(s, o, w) if o > 0 else s
    out += [
        f"With {pick['backend']} and {pick['world_size']} ranks (o = {num(o * 1e6, 1)} µs, w = {num(w / 1e9)} GB/s), the XL model's "
        f"{num(s / 2**30)} GiB of fp32 gradients, and compute per bucket equal to its transfer time, the time added after "
        "backward is s/(n_b·w) + n_b·o (see `lmperf.distributed.bucket_model`); it is smallest at a bucket size of "
        f"√(s·w·o) = **{num(best / 2**20, 1)} MB**. Predicted overhead per bucket size:", "",
        table(pd.DataFrame({"bucket (MB)": [str(b) for b in BUCKETS_MB],
                            "overhead (ms)": [num(ddp_overhead(b * 2**20, s, o, w) * 1e3) for b in BUCKETS_MB]})), "",
    ]
    return "\n".join(out)
