"""The report's "Attention at scale" section: naive attention's time, memory and OOM frontier, from data."""

import numpy as np
import pandas as pd

from lmperf.attention.accounting import naive_attention_saved_bytes
from lmperf.report.attention_figures import held_mib
from lmperf.report.markdown import num, ok, pct, table


def expected_held_mib(row) -> float:
    """The computed counterpart of the 'held' measurement of this row.

    The allocator sees what a forward adds: the saved tensors less the inputs (allocated before),
    plus the output. The saved-tensor hooks see exactly the saved tensors, inputs included.
    """
    if row.get("held_for_backward_mib") == row.get("held_for_backward_mib"):  # measured by the allocator
        vector = row["batch"] * row["seq"] * row["d"] * 4 / 2**20
        return row["computed_saved_mib"] - 3 * vector + vector
    return row["computed_saved_mib"]


def fitted_exponent(rows: pd.DataFrame) -> float:
    """Slope of log(held memory) vs log(seq) over the ok rows with seq >= 1024 (all rows if fewer)."""
    big = rows[rows["seq"] >= 1024]
    use = big if big["seq"].nunique() >= 2 else rows
    if use["seq"].nunique() < 2:
        return float("nan")
    return float(np.polyfit(np.log(use["seq"]), np.log(use["held"]), 1)[0])


def render(attention: pd.DataFrame) -> str:
    out = ["## Attention at scale", ""]
    rows = attention.assign(held=held_mib(attention) if len(ok(attention)) else np.nan)
    first = rows.iloc[0]
    on_gpu = rows["held_for_backward_mib"].notna().any() if "held_for_backward_mib" in rows else False
    source = (
        "the allocator's count after the forward"
        if on_gpu
        else "the bytes autograd saves (saved_tensors_hooks; no allocator on a CPU)"
    )
    out += [
        f"Naive attention alone (no heads, no mask), batch {int(first['batch'])}, {int(first['steps'])} timed "
        "forward and "
        f"backward passes per point on **{first['device_name']}**. Memory held for backward: {source}.",
        "",
    ]

    def cell(r, column, digits=3):
        return num(r[column], digits) if r["status"] == "ok" else r["status"].upper()

    shown = rows.sort_values(["compile", "d", "seq"])
    out += [
        table(
            pd.DataFrame(
                {
                    "compile": shown["compile"],
                    "d": shown["d"],
                    "seq": shown["seq"],
                    "forward (ms)": [cell(r, "forward_mean_ms") for _, r in shown.iterrows()],
                    "backward (ms)": [cell(r, "backward_mean_ms") for _, r in shown.iterrows()],
                    "held for backward (MiB)": [cell(r, "held", 1) for _, r in shown.iterrows()],
                    "computed saved (MiB)": shown["computed_saved_mib"].map(lambda x: num(x, 1)),
                    "first call (ms)": [cell(r, "first_call_ms", 1) for _, r in shown.iterrows()],
                }
            )
        ),
        "",
        "![Naive attention at scale](figures/attention_sweep.png)",
        "",
    ]
    first_calls = ok(rows).groupby("compile")["first_call_ms"]
    if {"eager", "compiled"} <= set(first_calls.groups):
        out += [
            f"Compile time is kept apart from the timed passes: the first call of a new shape took "
            f"{num(first_calls.median()['compiled'], 0)} ms compiled (median; tracing and code generation) against "
            f"{num(first_calls.median()['eager'], 0)} ms eager, and none of it is in the forward and backward columns.",
            "",
        ]

    eager = rows[rows["compile"] == "eager"]
    lines = []
    for d, group in eager.groupby("d"):
        fits, ooms = ok(group), group[group["status"] == "oom"]
        largest = fits.sort_values("seq").iloc[-1] if len(fits) else None
        text = f"- d = {d}: "
        if largest is not None:
            expected = expected_held_mib(largest)
            text += (
                f"largest fitting seq {int(largest['seq'])}, holding {num(largest['held'], 1)} MiB for backward "
                "against "
                f"{num(expected, 1)} MiB computed ({pct(largest['held'] / expected - 1)} off)"
            )
        if len(ooms):
            text += f"; out of memory from seq {int(ooms['seq'].min())}"
        lines.append(text + ".")
    out += lines + [""]

    oom = eager[eager["status"] == "oom"].sort_values(["seq", "d"])
    if len(oom):
        smallest = oom.iloc[0]
        parts = naive_attention_saved_bytes(int(smallest["batch"]), int(smallest["seq"]), int(smallest["d"]))
        out += [
            f"The smallest configuration that runs out of memory is d = {int(smallest['d'])}, seq "
            f"{int(smallest['seq'])}. "
            "What its forward would keep for backward, against the device's "
            f"{num(smallest['device_total_mib'] / 1024, 1)} GiB:",
            "",
            table(pd.DataFrame({"tensor": list(parts), "GiB": [num(b / 2**30, 3) for b in parts.values()]})),
            "",
            f"Together {num(sum(parts.values()) / 2**30, 2)} GiB.",
            "",
        ]

    fitted = ok(eager).dropna(subset=["held"])
    slope = fitted_exponent(fitted)
    if slope == slope:
        largest = fitted.sort_values("seq").iloc[-1]
        square_share = largest["computed_square_mib"] / largest["computed_saved_mib"]
        lse_mib = largest["batch"] * largest["seq"] * 4 / 2**20
        out += [
            f"Memory held for backward grows as seq^{num(slope)} (least-squares slope on log-log axes). At d = "
            f"{int(largest['d'])}, "
            f"seq {int(largest['seq'])}, {pct(square_share)} of the computed saved bytes are the three seq × "
            "seq tensors "
            f"(scores, exp, P). FlashAttention never stores them: it keeps the (batch, seq) logsumexp, "
            f"{num(lse_mib, 3)} MiB here, and recomputes P tile by tile in the backward pass, so what it holds grows "
            "linearly in the sequence length.",
            "",
        ]
    return "\n".join(out)
