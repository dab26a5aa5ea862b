"""The report's "Memory" section: peaks and phase boundaries per recorded step, the largest
allocations and their source, the residual stream found in the trace, and a computed budget."""

import pandas as pd

from lmperf.report.markdown import num, ok, pct, table

PHASES = ("model_built_mib", "after_forward_mib", "after_backward_mib", "after_optimizer_step_mib")


def budget(row: pd.Series) -> dict:
    """The peak of a first training step, modelled: the larger of (weights + the activations the
    forward keeps, measured as memory after forward minus after construction) and (weights +
    gradients + AdamW's two moments, 16 bytes a parameter in fp32, computed)."""
    weights = 4 * row["params"] / 2**20
    activations = row["after_forward_mib"] - row["model_built_mib"]
    optimizer_phase = 16 * row["params"] / 2**20
    peak = row["allocator_peak_mib"] if pd.notna(row.get("allocator_peak_mib")) else row["trace_peak_mib"]
    return {"weights_mib": weights, "activations_mib": activations, "optimizer_phase_mib": optimizer_phase,
            "budget_mib": max(weights + activations, optimizer_phase), "peak_mib": peak,
            "peak_phase": "forward" if weights + activations > optimizer_phase else "optimizer step"}


def _range(ratio: pd.Series) -> str:
    low, high = pct(ratio.min(), 0), pct(ratio.max(), 0)
    return low if low == high else f"{low}–{high}"


def render(memory: pd.DataFrame, allocations: pd.DataFrame) -> str:
    out = ["## Memory", ""]
    rows = ok(memory)
    failed = memory[memory["status"] != "ok"]
    if rows.empty:
        return "\n".join(out + ["No memory step was recorded.", ""])
    rows = rows.sort_values(["mode", "precision", "context_length"])
    first = rows.iloc[0]
    profilers = ", ".join(sorted(rows["profiler"].unique()))
    out += [
        f"{first['size']} model, batch {int(first['batch_size'])}, one step per row recorded by **{profilers}** on "
        f"{first['device_name']}: the model is built, then one forward pass (`forward`, no autograd graph) or one "
        "forward + backward + optimizer step (`train_step`). Memory in MiB; *trace* numbers come from the "
        "recorded allocations, *allocator* from torch.cuda's statistics.", "",
        table(pd.DataFrame({
            "mode": rows["mode"], "precision": rows["precision"], "context": rows["context_length"],
            "trace peak": rows["trace_peak_mib"].map(lambda x: num(x, 1)),
            "allocator peak": rows["allocator_peak_mib"].map(lambda x: num(x, 1)),
            **{label: rows[col].map(lambda x: num(x, 1)) for label, col in
               zip(("built", "after forward", "after backward", "after step"), PHASES) if col in rows},
        })), "",
    ]
    if len(failed):
        out += ["Did not fit: " + "; ".join(f"{r.mode} {r.precision} ctx {r.context_length} ({r.status})"
                                             for r in failed.itertuples()) + ".", ""]

    for mode, group in rows.groupby("mode"):
        by = group.pivot_table(index="context_length", columns="precision", values="trace_peak_mib")
        if {"fp32", "bf16"} <= set(by.columns):
            ratio = (by["bf16"] / by["fp32"]).dropna()
            if len(ratio):
                why = ("Autocast only changes activations and their saved copies; weights, gradients and AdamW "
                       "state stay fp32." if mode == "train_step" else
                       "Without a backward pass only the live activations shrink.")
                if ratio.max() > 1:
                    ctx = ratio.idxmax()
                    excess = by.loc[ctx, "bf16"] - by.loc[ctx, "fp32"]
                    half_weights = group["params"].iloc[0] * 2 / 2**20
                    why += (" Where bf16 needs more, it is autocast's cast cache: a bf16 copy of each weight, kept "
                            f"until the autocast region ends, so copies of all weights are live at once (at context "
                            f"{ctx} the excess is {num(excess, 1)} MiB against {num(half_weights, 1)} MiB of bf16 "
                            "weights), more than the smaller activations save.")
                out.append(f"- {mode}: the bf16 peak is {_range(ratio)} of the fp32 peak. {why}")
    out.append("")

    residual = rows.drop_duplicates("context_length")
    out += ["Residual stream, B × T × d_model × 4 bytes, and whether an allocation of exactly that size appears in "
            "the trace:", "",
            table(pd.DataFrame({"context": residual["context_length"],
                                "residual stream (MiB)": residual["residual_stream_mib"].map(lambda x: num(x, 3)),
                                "seen in trace": residual["residual_stream_seen"].map(lambda x: "yes" if x else "no")})), ""]

    train = rows[(rows["mode"] == "train_step") & (rows["precision"] == "fp32")]
    if len(train) and train[list(PHASES)].notna().all(axis=None):
        row = train.sort_values("context_length").iloc[0]
        b = budget(row)
        error = b["budget_mib"] / b["peak_mib"] - 1
        out += [f"Budget of the fp32 train step at context {int(row['context_length'])} "
                f"({num(row['params'] / 1e6, 1)} M parameters): weights alone {num(b['weights_mib'], 1)} MiB plus "
                f"{num(b['activations_mib'], 1)} MiB of activations kept by the forward (measured) at the end of the "
                f"forward, against weights + gradients + AdamW state = 16 B a parameter = {num(b['optimizer_phase_mib'], 1)} MiB "
                f"(computed) at the optimizer step. The larger, {num(b['budget_mib'], 1)} MiB at the {b['peak_phase']}, "
                f"against the measured peak of {num(b['peak_mib'], 1)} MiB: {pct(error)} "
                f"(bar: within 10%: **{'met' if abs(error) <= 0.10 else 'not met'}**).", ""]

    if len(allocations):
        biggest = rows.sort_values("context_length").iloc[-1]
        pick = allocations[(allocations["mode"] == biggest["mode"]) & (allocations["precision"] == biggest["precision"])
                           & (allocations["context_length"] == biggest["context_length"])].head(10)
        out += [f"Largest allocations (top 10% by size; first ten) of {biggest['mode']}, {biggest['precision']}, "
                f"context {int(biggest['context_length'])}, with the innermost frame of our code (the op's name "
                "where torch.profiler recorded it):", "",
                table(pd.DataFrame({"size (MiB)": pick["size_mib"].map(lambda x: num(x, 2)),
                                    "count": pick["count"], "made by": pick["frame"].fillna("— (no Python frame of ours)")})), ""]
    out += ["Active memory timelines (stacked live allocations, largest sources coloured, phases shaded):", ""]
    out += [f"![{r.mode} {r.precision} ctx {r.context_length}](figures/memory/{r.precision}-{r.mode}-ctx{r.context_length}.png)"
            for r in rows.itertuples()]
    return "\n".join(out + [""])
