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


def frontier(eager: pd.DataFrame) -> pd.DataFrame:
    """Per head size: the longest sequence that fit, the MiB it held for backward against the computed
    count, and the shortest sequence that ran out of memory (NaN where none did)."""
    out = []
    for d, group in eager.groupby("d"):
        fits, ooms = ok(group), group[group["status"] == "oom"]
        largest = fits.sort_values("seq").iloc[-1] if len(fits) else None
        out.append(
            {
                "d": d,
                "largest_seq": largest["seq"] if largest is not None else np.nan,
                "held_mib": largest["held"] if largest is not None else np.nan,
                "expected_mib": expected_held_mib(largest) if largest is not None else np.nan,
                "oom_from": ooms["seq"].min() if len(ooms) else np.nan,
            }
        )
    return pd.DataFrame(out, columns=["d", "largest_seq", "held_mib", "expected_mib", "oom_from"])


def growth(eager: pd.DataFrame) -> dict | None:
    """How the memory held for backward grows with the sequence (the fitted exponent), and at the
    longest sequence that fit, the share of the three seq x seq tensors and the MiB of the logsumexp
    that FlashAttention keeps instead; None where fewer than two sequences fit."""
    fitted = ok(eager).dropna(subset=["held"])
    slope = fitted_exponent(fitted)
    if slope != slope:
        return None
    largest = fitted.sort_values("seq").iloc[-1]
    return {
        "slope": slope,
        "d": int(largest["d"]),
        "seq": int(largest["seq"]),
        "square_share": largest["computed_square_mib"] / largest["computed_saved_mib"],
        "lse_mib": largest["batch"] * largest["seq"] * 4 / 2**20,
    }


def _intro(rows: pd.DataFrame) -> list[str]:
    first = rows.iloc[0]
    on_gpu = rows["held_for_backward_mib"].notna().any() if "held_for_backward_mib" in rows else False
    source = (
        "the allocator's count after the forward"
        if on_gpu
        else "the bytes autograd saves (saved_tensors_hooks; no allocator on a CPU)"
    )
    return [
        f"Naive attention alone (no heads, no mask), batch {int(first['batch'])}, {int(first['steps'])} timed "
        "forward and "
        f"backward passes per point on **{first['device_name']}**. Memory held for backward: {source}.",
        "",
    ]


def _table(rows: pd.DataFrame) -> list[str]:
    def cell(r, column, digits=3):
        return num(r[column], digits) if r["status"] == "ok" else r["status"].upper()

    shown = rows.sort_values(["compile", "d", "seq"])
    frame = pd.DataFrame(
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
    return [table(frame), "", "![Naive attention at scale](figures/attention_sweep.png)", ""]


def _compile_time(rows: pd.DataFrame) -> list[str]:
    first_calls = ok(rows).groupby("compile")["first_call_ms"]
    if not {"eager", "compiled"} <= set(first_calls.groups):
        return []
    return [
        f"Compile time is kept apart from the timed passes: the first call of a new shape took "
        f"{num(first_calls.median()['compiled'], 0)} ms compiled (median; tracing and code generation) against "
        f"{num(first_calls.median()['eager'], 0)} ms eager, and none of it is in the forward and backward columns.",
        "",
    ]


def _frontier_lines(eager: pd.DataFrame) -> list[str]:
    lines = []
    for r in frontier(eager).itertuples():
        text = f"- d = {r.d}: "
        if r.largest_seq == r.largest_seq:
            text += (
                f"largest fitting seq {int(r.largest_seq)}, holding {num(r.held_mib, 1)} MiB for backward "
                "against "
                f"{num(r.expected_mib, 1)} MiB computed ({pct(r.held_mib / r.expected_mib - 1)} off)"
            )
        if r.oom_from == r.oom_from:
            text += f"; out of memory from seq {int(r.oom_from)}"
        lines.append(text + ".")
    return lines + [""]


def _first_oom(eager: pd.DataFrame) -> list[str]:
    oom = eager[eager["status"] == "oom"].sort_values(["seq", "d"])
    if oom.empty:
        return []
    smallest = oom.iloc[0]
    parts = naive_attention_saved_bytes(int(smallest["batch"]), int(smallest["seq"]), int(smallest["d"]))
    return [
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


def _growth_sentence(eager: pd.DataFrame) -> list[str]:
    g = growth(eager)
    if g is None:
        return []
    return [
        f"Memory held for backward grows as seq^{num(g['slope'])} (least-squares slope on log-log axes). At d = "
        f"{g['d']}, "
        f"seq {g['seq']}, {pct(g['square_share'])} of the computed saved bytes are the three seq × "
        "seq tensors "
        f"(scores, exp, P). FlashAttention never stores them: it keeps the (batch, seq) logsumexp, "
        f"{num(g['lse_mib'], 3)} MiB here, and recomputes P tile by tile in the backward pass, so what it holds grows "
        "linearly in the sequence length.",
        "",
    ]


def render(attention: pd.DataFrame) -> str:
    rows = attention.assign(held=held_mib(attention) if len(ok(attention)) else np.nan)
    eager = rows[rows["compile"] == "eager"]
    out = ["## Attention at scale", "", *_intro(rows), *_table(rows), *_compile_time(rows)]
    out += _frontier_lines(eager) + _first_oom(eager) + _growth_sentence(eager)
    return "\n".join(out)
