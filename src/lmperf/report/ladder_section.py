"""The report's "How fast can it train?" section, from results/ladder.csv: the roofline ladder.

Every statement compares rungs of one (size, context) point: one process, one commit, interleaved.
A ratio is a win only where its bootstrap CI excludes 1.
"""

import pandas as pd

from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM
from lmperf.measure.stats import ratio_ci, resolved, split_ms
from lmperf.report.markdown import num, pct, ratio, table, text
from lmperf.report.style import sort_by_size

TOP = "cuda_graph"  # the top rung built so far
ANCHOR = "torch_stack"


def times(row: pd.Series) -> list[float]:
    """The rung's per-step times: the replays for a graphed rung, else the launched steps."""
    return split_ms(row["step_times_ms"])


def speedup(slow: pd.Series, fast: pd.Series) -> tuple[float, float, float]:
    """slow / fast step time, with its CI: paired where both were launched in one interleaved pass."""
    paired = not (bool(slow["graphed"]) or bool(fast["graphed"]))
    return ratio_ci(times(slow), times(fast), paired=paired)


def with_ci(value: float, low: float, high: float, digits: int = 2) -> str:
    return f"{num(value, digits)} [{num(low, digits)}, {num(high, digits)}]"


def claim(value: float, low: float, high: float) -> str:
    """A ratio as a sentence fragment, 'not resolved' where its CI holds 1."""
    shown = f"{ratio(value)} (95% CI {num(low)}–{num(high)})"
    return shown if resolved(low, high) else f"{shown}: not resolved"


def point_table(point: pd.DataFrame) -> str:
    rows = []
    previous = None
    for _, row in point.iterrows():
        ran = row["status"] == "ok"
        step = with_ci(row["median_ms"], row["ci95_low_ms"], row["ci95_high_ms"], 1) if ran else row["status"]
        gain = "—"
        if ran and previous is not None and row["on_ladder"]:
            gain = ratio(speedup(previous, row)[0])
        if ran and row["on_ladder"]:
            previous = row
        rows.append(
            {
                "rung": row["rung"],
                "adds": row["adds"],
                "step ms (CI)": step,
                "× previous": gain,
                "tokens/s": num(row.get("tokens_per_s"), 0),
                "MFU step": pct(row.get("mfu", float("nan"))),
                "MFU fwd+bwd": pct(row.get("fwd_bwd_mfu", float("nan"))),
                "fwd / bwd / opt ms": " / ".join(
                    num(row.get(c), 1) for c in ("forward_ms", "backward_ms", "optimizer_ms")
                ),
                "opt GB/s": num(row.get("optimizer_gbps"), 0),
                "peak GiB": num(row.get("peak_mem_gib"), 1),
                "loss": num(row.get("loss_after_check"), 4),
                "note": row["note"] if isinstance(row["note"], str) else "",
            }
        )
    return table(pd.DataFrame(rows))


def point_sentences(point: pd.DataFrame) -> list[str]:
    """Computed statements about one (size, context) point."""
    ran = point[point["status"] == "ok"].set_index("rung", drop=False)
    ladder = ran[ran["on_ladder"].astype(bool)]
    out = []
    if len(ladder) >= 2:
        gains = [
            (speedup(a, b), a["rung"], b["rung"])
            for (_, a), (_, b) in zip(ladder.iloc[:-1].iterrows(), ladder.iloc[1:].iterrows())
        ]
        (best, low, high), before, after = max(gains, key=lambda g: g[0][0])
        out.append(f"- Largest single gain: `{after}` over `{before}`, {claim(best, low, high)}.")
        first, last = ladder.iloc[0], ladder.iloc[-1]
        out.append(f"- `{last['rung']}` over `{first['rung']}`: {claim(*speedup(first, last))}.")
    if TOP in ran.index and ANCHOR in ran.index:
        anchor = ran.loc[ANCHOR]
        out.append(f"- `{TOP}` over the torch stack (`{ANCHOR}`, launched): {claim(*speedup(anchor, ran.loc[TOP]))}.")
        replayed = split_ms(anchor.get("graphed_step_times_ms"))
        if replayed:  # the anchor replayed as a CUDA graph too: GPU time against GPU time
            ratio_graphed = ratio_ci(replayed, times(ran.loc[TOP]), paired=False)
            out.append(f"- `{TOP}` over the torch stack replayed as a CUDA graph: {claim(*ratio_graphed)}.")
    split = ladder[ladder["optimizer_ms"].notna()] if "optimizer_ms" in ladder else ladder.iloc[:0]
    if not split.empty:
        row = split.iloc[-1]
        parts = {k: row[f"{k}_ms"] for k in ("forward", "backward", "optimizer")}
        total = sum(parts.values())
        shares = ", ".join(f"{k} {num(v, 1)} ms ({pct(v / total, 0)})" for k, v in parts.items())
        out.append(f"- Where `{row['rung']}`'s time goes (per phase, launched): {shares}.")
    out += optimizer_sentences(ran)
    top = ladder.iloc[-1] if not ladder.empty else None
    if top is not None and top["matmul_tflops"] == top["matmul_tflops"]:
        roofline_ms = (
            top["model_tflop_per_step"] / top["matmul_tflops"] * 1e3
            + ADAMW_BYTES_PER_PARAM * top["params"] / (top["hbm_gbps"] * 1e9) * 1e3
        )
        out.append(
            f"- Roofline: {num(top['model_tflop_per_step'] * 1e3 / top['matmul_tflops'], 1)} ms of FLOPs at the "
            f"measured bf16 matmul rate ({num(top['matmul_tflops'], 0)} TF/s) plus the optimizer's "
            f"{num(top['optimizer_bound_ms'], 1)} ms at the measured HBM bandwidth: {num(roofline_ms, 1)} ms. "
            f"`{top['rung']}` takes {num(top['median_ms'], 1)} ms, "
            f"{ratio(top['median_ms'] / roofline_ms)} the roofline."
        )
    checked = ran[ran["loss_after_check"].notna()] if "loss_after_check" in ran else ran.iloc[:0]
    if "bf16" in checked.index and len(checked) > 1:
        reference = checked.loc["bf16", "loss_after_check"]
        gaps = (checked["loss_after_check"] - reference).abs()
        worst = gaps.idxmax()
        steps = int(checked["check_steps"].iloc[0])
        out.append(
            f"- Same computation: after {steps} steps from the same weights and batch (loss "
            f"{num(checked['initial_loss'].iloc[0], 4)} before), the rungs' losses are "
            f"{num(checked['loss_after_check'].min(), 4)}–{num(checked['loss_after_check'].max(), 4)}; the largest "
            f"difference from rung `bf16` is `{worst}`'s, {num(gaps[worst], 4)}."
        )
    return out


def optimizer_sentences(ran: pd.DataFrame) -> list[str]:
    """Each AdamW's step alone, replayed as a CUDA graph (GPU time), against the measured HBM bandwidth;
    where that was not measured (a CPU), its phase time in the launched step."""
    out = []
    for optimizer, rows in ran.groupby("optimizer", sort=False):
        row = rows.iloc[0]
        graphed = row.get("optimizer_graphed_ms", float("nan"))
        if graphed == graphed:
            out.append(
                f"- `{optimizer}` AdamW alone, replayed as a CUDA graph: {num(graphed, 2)} ms, "
                f"{num(row['optimizer_graphed_gbps'], 0)} GB/s at {ADAMW_BYTES_PER_PARAM} B/param: "
                f"{pct(row['optimizer_graphed_gbps'] / row['hbm_gbps'])} of the {num(row['hbm_gbps'], 0)} GB/s "
                "copy bandwidth measured in this process."
            )
        elif row.get("optimizer_ms", float("nan")) == row.get("optimizer_ms", float("nan")):
            out.append(
                f"- `{optimizer}` AdamW in rung `{row['rung']}` (launched): {num(row['optimizer_ms'], 1)} ms, "
                f"{num(row.get('optimizer_gbps'), 0)} GB/s at {ADAMW_BYTES_PER_PARAM} B/param."
            )
    return out


def render(ladder: pd.DataFrame) -> str:
    out = [
        "## How fast can it train?",
        "",
        "The roofline ladder (`results/ladder.csv`): the handout's train step, then one technique added per rung; "
        "beside it torch's fused AdamW in our rung's place, and the torch stack a user gets without lmperf "
        "(whole-model `torch.compile`, SDPA, `torch.optim.AdamW(fused=True)`). All rungs of a point run in one "
        "process on one model, interleaved; steps are launched, except `cuda_graph`, which replays the step as "
        "a CUDA graph. MFU is against the bf16 dense peak for every rung (so it ranks rungs as their speed does); "
        "train-step FLOPs are 3× the forward's. Medians with 95% bootstrap CIs.",
        "",
        "![The roofline ladder](figures/ladder_waterfall.png)",
        "",
    ]
    ladder = sort_by_size(ladder, ["size", "context_length", "order"])
    for (size, ctx), point in ladder.groupby(["size", "context_length"], sort=False):
        device = text(point["device_name"].iloc[0])
        out += [f"### {size}, context {ctx} ({device})", "", point_table(point), ""]
        sentences = point_sentences(point)
        out += sentences + ([""] if sentences else [])
    return "\n".join(out)
