"""Derived quantities of the end-to-end grid: ratios, speed-ups, timer agreement, trends.

Pure functions of the aggregated CSVs, shared by the figures and the report text so both show the
same numbers.
"""

import pandas as pd

from lmperf.report.markdown import ok

POINT = ["attention", "size", "params", "context_length", "precision", "compile"]


def handout_model(e2e: pd.DataFrame) -> pd.DataFrame:
    """The rows of the handout's model (naive attention): the timings, ratios and figures of the
    study are about it; other attentions only enter the naive-vs-other comparison."""
    return e2e[e2e["attention"] == "naive"]


def mean_times(e2e: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point, one column of mean step time (ms) per mode; NaN where not ok."""
    return ok(e2e).pivot_table(index=POINT, columns="mode", values="mean_ms").reset_index()


def backward_ratio(e2e: pd.DataFrame) -> pd.DataFrame:
    """(forward + backward) / forward time per point where both ran."""
    times = mean_times(e2e)
    if not {"forward", "forward_backward"} <= set(times.columns):
        return times.assign(ratio=pd.Series(dtype=float)).iloc[:0]
    times["ratio"] = times["forward_backward"] / times["forward"]
    return times.dropna(subset=["ratio"])


def speedup(e2e: pd.DataFrame, column: str, slow: str, fast: str) -> pd.DataFrame:
    """time(column=slow) / time(column=fast) per mode, matched on every other grid coordinate."""
    keys = [k for k in POINT if k != column] + ["mode"]
    rows = ok(e2e)
    slow_t = rows[rows[column] == slow].set_index(keys)["mean_ms"]
    fast_t = rows[rows[column] == fast].set_index(keys)["mean_ms"]
    joined = pd.concat({"slow_ms": slow_t, "fast_ms": fast_t}, axis=1, join="inner").reset_index()
    joined["speedup"] = joined["slow_ms"] / joined["fast_ms"]
    return joined


def timer_agreement(e2e: pd.DataFrame) -> pd.Series:
    """|host timer - CUDA events| / CUDA events per ok row that has event timing."""
    rows = ok(e2e).dropna(subset=["event_mean_ms"])
    return ((rows["mean_ms"] - rows["event_mean_ms"]).abs() / rows["event_mean_ms"]).rename("disagreement")


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
