"""Derived quantities of the end-to-end grid: ratios, speed-ups, physics checks, optimizer bandwidth.

Pure functions of the aggregated CSVs, shared by the figures and the report text so both show the
same numbers. Conclusions about the GPU use GPU-bound time: the CUDA-graph replay's median
(``GPU_MS``). Launched times are the handout's measurement and, on a slow host, the host's.
Every summary is taken per regime (precision x compile mode), never across them.
"""

import numpy as np
import pandas as pd

from lmperf import grid
from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM, peak_hbm_tbps
from lmperf.measure.settings import setting
from lmperf.measure.stats import ratio_ci, resolved, split_ms
from lmperf.report.markdown import ok

POINT = ["attention", "size", "params", "context_length", "precision", "compile"]
REGIME = ["precision", "compile"]
GPU_MS = "graphed_median_ms"
LAUNCHED_MS = "median_ms"


def handout_model(e2e: pd.DataFrame) -> pd.DataFrame:
    """The rows of the handout's model (naive attention): the timings, ratios and figures of the
    study are about it; other attentions only enter the attention comparison."""
    return e2e[e2e["attention"] == "naive"]


def gpu_bound(e2e: pd.DataFrame, value: str = GPU_MS) -> pd.DataFrame:
    """The ok rows that have a time in ``value`` (by default the graphed, GPU-bound one)."""
    return ok(e2e).dropna(subset=[value]) if value in e2e else e2e.iloc[:0]


def step_times(e2e: pd.DataFrame, value: str = GPU_MS) -> pd.DataFrame:
    """One row per grid point, one column of median step time (ms) per mode; NaN where not measured."""
    rows = gpu_bound(e2e, value)
    if rows.empty:
        return pd.DataFrame(columns=POINT)
    return rows.pivot_table(index=POINT, columns="mode", values=value).reset_index()


def backward_ratio(e2e: pd.DataFrame, value: str = GPU_MS) -> pd.DataFrame:
    """(forward + backward) / forward time per point where both ran."""
    times = step_times(e2e, value)
    if not {"forward", "forward_backward"} <= set(times.columns):
        return times.assign(ratio=pd.Series(dtype=float)).iloc[:0]
    times["ratio"] = times["forward_backward"] / times["forward"]
    return times.dropna(subset=["ratio"])


def speedup(e2e: pd.DataFrame, column: str, slow: str, fast: str, value: str = GPU_MS) -> pd.DataFrame:
    """time(column=slow) / time(column=fast) per mode, matched on every other grid coordinate and on
    the commit: the two sides come from different targets, and a speed-up compares one code."""
    keys = [k for k in POINT if k != column] + ["mode", "commit"]
    rows = gpu_bound(e2e, value)
    slow_t = rows[rows[column] == slow].set_index(keys)[value]
    fast_t = rows[rows[column] == fast].set_index(keys)[value]
    joined = pd.concat({"slow_ms": slow_t, "fast_ms": fast_t}, axis=1, join="inner").reset_index()
    joined["speedup"] = joined["slow_ms"] / joined["fast_ms"]
    return joined


def physics_violations(e2e: pd.DataFrame, slack: float | None = None) -> pd.DataFrame:
    """Where GPU-bound times break physics: a train step faster than forward+backward, forward+backward
    faster than forward, or a longer context or a bigger model faster (beyond ``slack``, by default
    the rows' ``physics_slack``)."""
    slack = setting(e2e, "physics_slack") if slack is None else slack
    times = step_times(e2e)
    found = []
    for faster, slower in (("train_step", "forward_backward"), ("forward_backward", "forward")):
        if {faster, slower} <= set(times.columns):
            bad = times[times[faster] < times[slower] * (1 - slack)]
            found += [{"kind": f"{faster} < {slower}", **r} for r in bad[POINT].to_dict("records")]
    modes = [m for m in grid.MODES if m in times.columns]
    for grow, within in (
        ("context_length", ["attention", "size", "precision", "compile"]),
        ("params", ["attention", "context_length", "precision", "compile"]),
    ):
        for _, group in times.groupby(within):
            group = group.sort_values(grow)
            for mode in modes:
                series = group[mode].to_numpy()
                for i in np.flatnonzero(series[1:] < series[:-1] * (1 - slack)):
                    found.append({"kind": f"{mode} falls as {grow} grows", **group.iloc[i + 1][POINT].to_dict()})
    return pd.DataFrame(found, columns=["kind", *POINT])


def optimizer_bandwidth(e2e: pd.DataFrame) -> pd.DataFrame:
    """The optimizer step's GPU time (train step - forward+backward, graphed, median over contexts) per
    (size, precision, compile), its bandwidth at AdamW's least traffic of 28 bytes a parameter, and
    the time that traffic takes at the device's HBM bandwidth."""
    times = step_times(handout_model(e2e))
    if not {"train_step", "forward_backward"} <= set(times.columns):
        return pd.DataFrame(columns=["size", "params", "precision", "compile", "optimizer_ms", "gb_per_s", "bound_ms"])
    times["optimizer_ms"] = times["train_step"] - times["forward_backward"]
    out = times.groupby(["size", "params", "precision", "compile"], as_index=False)["optimizer_ms"].median()
    device = str(ok(e2e)["device_name"].iloc[0])
    tbps = peak_hbm_tbps(device)
    traffic = out["params"] * ADAMW_BYTES_PER_PARAM
    out["gb_per_s"] = traffic / (out["optimizer_ms"] / 1e3) / 1e9
    out["bound_ms"] = traffic / (tbps * 1e12) * 1e3 if tbps else float("nan")
    return out


def launched_against(e2e: pd.DataFrame, base: str = "sdpa", other: str = "flash_triton") -> pd.DataFrame:
    """base time / other time of the launched steps per point and mode, as a user times a model, with
    the paired bootstrap CI of their steps (e2e interleaves the launched steps of a point's attention
    variants, A B A B); ``resolved`` when the CI excludes 1. Host-bound rows included: launched is
    what the user meets, host time and all."""
    keys = ["size", "params", "context_length", "precision", "compile", "mode"]
    rows = ok(e2e[e2e["attention"].isin([base, other])])
    out = []
    for point, group in rows.groupby(keys):
        by_attention = group.set_index("attention")
        if not {base, other} <= set(by_attention.index):
            continue
        base_row, other_row = by_attention.loc[base], by_attention.loc[other]
        value, low, high = ratio_ci(split_ms(base_row["step_times_ms"]), split_ms(other_row["step_times_ms"]))
        out.append(
            {
                **dict(zip(keys, point)),
                "base_ms": base_row["median_ms"],
                "other_ms": other_row["median_ms"],
                "speedup": value,
                "ci95_low": low,
                "ci95_high": high,
                "resolved": resolved(low, high),
                "host_bound": bool(base_row["host_bound"] or other_row["host_bound"]),
            }
        )
    columns = [*keys, "base_ms", "other_ms", "speedup", "ci95_low", "ci95_high", "resolved", "host_bound"]
    return pd.DataFrame(out, columns=columns)


def attention_ratios(e2e: pd.DataFrame, base: str = "naive", mode: str = "train_step") -> pd.DataFrame:
    """base time / other time per point, on graphed replays timed in one process, with a bootstrap CI;
    ``resolved`` when the CI excludes 1 (no difference). The CI pairs replay i of one variant with
    replay i of the other only where the replays were interleaved step by step (rows without
    ``graphed_turns``, made before the replays took turns in blocks)."""
    rows = gpu_bound(e2e[e2e["mode"] == mode])
    keys = ["size", "params", "context_length", "precision", "compile"]
    out = []
    for point, group in rows.groupby(keys):
        by_attention = group.set_index("attention")
        if base not in by_attention.index:
            continue
        base_times = split_ms(by_attention.loc[base].get("graphed_step_times_ms"))
        for other in (a for a in by_attention.index if a != base):
            other_times = split_ms(by_attention.loc[other].get("graphed_step_times_ms"))
            if not base_times or not other_times:
                continue
            paired = pd.isna(by_attention.loc[base].get("graphed_turns", float("nan")))
            value, low, high = ratio_ci(base_times, other_times, paired=paired)
            out.append(
                {
                    **dict(zip(keys, point)),
                    "attention": other,
                    "base_ms": by_attention.loc[base, GPU_MS],
                    "other_ms": by_attention.loc[other, GPU_MS],
                    "speedup": value,
                    "ci95_low": low,
                    "ci95_high": high,
                    "resolved": resolved(low, high),
                }
            )
    return pd.DataFrame(
        out, columns=[*keys, "attention", "base_ms", "other_ms", "speedup", "ci95_low", "ci95_high", "resolved"]
    )


def timer_agreement(e2e: pd.DataFrame) -> pd.Series:
    """|host timer - CUDA events| / CUDA events of the launched medians, per ok row with event timing."""
    rows = ok(e2e).dropna(subset=["event_median_ms"])
    return ((rows[LAUNCHED_MS] - rows["event_median_ms"]).abs() / rows["event_median_ms"]).rename("disagreement")


def trend_with_size(frame: pd.DataFrame, value: str) -> float:
    """Spearman rank correlation of ``value`` with parameter count: +1 rises with size, -1 falls."""
    if frame["params"].nunique() < 2:
        return float("nan")
    return frame[["params", value]].corr(method="spearman").iloc[0, 1]


def describe_trend(rho: float) -> str:
    if rho != rho:  # NaN
        return "cannot be judged from one size"
    if rho >= 0.5:
        return "rises with model size"
    if rho <= -0.5:
        return "falls with model size"
    return "shows no clear trend with model size"


def warmup_steps_cost(warmup: pd.DataFrame, first_steps: int = 5) -> pd.DataFrame:
    """From each process's steps from its first: each of the first steps over that process's steady
    median (the median of its later steps), then the median and range of that ratio across processes,
    so what the early steps cost stands apart from one process's host jitter. A process that timed
    every warm-up count (``warmup_windows``) gives all its steps in its largest count's row (warm-up,
    then timed); otherwise the processes with no warm-up give theirs."""
    rows = ok(warmup)
    windowed = bool("warmup_windows" in rows and not rows.empty and rows["warmup_windows"].notna().all())
    first = rows.groupby(["size", "mode"])["warmup_steps"].transform("max") if windowed else 0
    cold = rows[rows["warmup_steps"] == first]
    out = []
    for (size, mode), group in cold.groupby(["size", "mode"]):
        ratios = []
        for row in group.itertuples():
            steps = (split_ms(row.warmup_times_ms) if windowed else []) + split_ms(row.step_times_ms)
            if len(steps) > first_steps + 1:
                steady = float(np.median(steps[first_steps:]))
                ratios.append([s / steady for s in steps[:first_steps]])
        if not ratios:
            continue
        ratios = np.array(ratios)
        for i in range(first_steps):
            out.append(
                {
                    "size": size,
                    "mode": mode,
                    "step": i + 1,
                    "processes": len(ratios),
                    "median_ratio": float(np.median(ratios[:, i])),
                    "min_ratio": float(ratios[:, i].min()),
                    "max_ratio": float(ratios[:, i].max()),
                }
            )
    return pd.DataFrame(out, columns=["size", "mode", "step", "processes", "median_ratio", "min_ratio", "max_ratio"])
