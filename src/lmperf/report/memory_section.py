"""The report's "Memory" section: the first step beside the steady state, peaks cross-checked
against the e2e study, a computed budget of the steady-state peak, and the largest allocations
named by what they are."""

import pandas as pd

from lmperf.measure.settings import setting
from lmperf.report.markdown import change as change_words
from lmperf.report.markdown import drop_empty, num, ok, pct, share, span, table

STAGES = ("after_forward_mib", "after_backward_mib", "after_optimizer_step_mib")
AT_PEAK = {
    "weights": "peak_weights_mib",
    "optimizer state": "peak_optimizer_mib",
    "gradients": "peak_gradients_mib",
    "activations and temporaries": "peak_activations_mib",
}


def peak(row) -> float:
    """The allocator's peak where there is one (CUDA), else the trace's."""
    return row["allocator_peak_mib"] if pd.notna(row.get("allocator_peak_mib")) else row["trace_peak_mib"]


def e2e_agreement(memory: pd.DataFrame, e2e: pd.DataFrame | None) -> pd.DataFrame:
    """Steady-state peaks beside the e2e study's ``peak_mem_gib`` for the same point (eager, naive
    attention, same size, precision, context and mode) measured at the same commit: two
    measurements from separate processes of the same code."""
    steady = ok(memory)
    steady = steady[steady["state"] == "steady"]
    if e2e is None or steady.empty or "peak_mem_gib" not in e2e:
        return pd.DataFrame()
    other = ok(e2e)
    other = other[(other["compile"] == "eager") & (other["attention"] == "naive")]
    joined = steady.merge(
        other[["size", "precision", "context_length", "mode", "peak_mem_gib", "commit"]],
        on=["size", "precision", "context_length", "mode", "commit"],
    )
    joined["e2e_mib"] = joined["peak_mem_gib"] * 1024
    joined["memory_mib"] = [peak(r) for _, r in joined.iterrows()]
    joined["difference"] = joined["memory_mib"] / joined["e2e_mib"] - 1
    return joined.dropna(subset=["difference"])


def render(memory: pd.DataFrame, allocations: pd.DataFrame, e2e: pd.DataFrame | None = None) -> str:
    out = ["## Memory", ""]
    rows = ok(memory)
    failed = memory[memory["status"] != "ok"]
    if rows.empty:
        return "\n".join(out + ["No memory step was recorded.", ""])
    rows = rows.sort_values(["mode", "precision", "context_length", "step"])
    first = rows.iloc[0]
    profilers = ", ".join(sorted(rows["profiler"].unique()))
    allocator = (
        ", *allocator* from torch.cuda's peak statistics (reset at each step's start)"
        if rows["allocator_peak_mib"].notna().any()
        else ""
    )
    out += [
        f"{first['size']} model, batch {int(first['batch_size'])}, {int(first['steps'])} steps recorded back to back "
        f"per row pair by **{profilers}** on {first['device_name']}: `forward` is inference (no autograd graph), "
        "`train_step` forward + backward + optimizer step. The *first* step of a fresh model creates AdamW's state "
        "after its backward; the *steady* row is the last step, when that state exists from the start. Memory in "
        f"MiB; *trace* numbers come from the recorded allocations{allocator}.",
        "",
        table(
            drop_empty(
                pd.DataFrame(
                    {
                        "mode": rows["mode"],
                        "precision": rows["precision"],
                        "context": rows["context_length"],
                        "step": rows["state"] + " (" + rows["step"].astype(int).astype(str) + ")",
                        "trace peak": rows["trace_peak_mib"].map(lambda x: num(x, 1)),
                        "allocator peak": rows["allocator_peak_mib"].map(lambda x: num(x, 1)),
                        **{
                            label: rows[col].map(lambda x: num(x, 1))
                            for label, col in zip(("after forward", "after backward", "after step"), STAGES)
                            if col in rows
                        },
                    }
                ),
                keep=["trace peak"],
            )
        ),
        "",
    ]
    if len(failed):
        out += [
            "Did not fit: "
            + "; ".join(f"{r.mode} {r.precision} ctx {r.context_length} ({r.status})" for r in failed.itertuples())
            + ".",
            "",
        ]
    out += _steady_vs_first(rows) + _precision_ratio(rows) + _agreement(memory, e2e) + _budget(rows)
    out += _largest(rows, allocations)
    out += ["Active memory timelines (live allocations stacked by what they are, phases shaded, all steps):", ""]
    shown = rows.drop_duplicates(["mode", "precision", "context_length"])
    out += [
        f"![{r.mode} {r.precision} ctx "
        f"{r.context_length}](figures/memory/{r.precision}-{r.mode}-ctx{r.context_length}.png)"
        for r in shown.itertuples()
    ]
    return "\n".join(out + [""])


def _steady_vs_first(rows: pd.DataFrame) -> list[str]:
    train = rows[rows["mode"] == "train_step"]
    pivot = train.pivot_table(index=["precision", "context_length"], columns="state", values="trace_peak_mib")
    if not {"first", "steady"} <= set(pivot.columns):
        return []
    growth = (pivot["steady"] / pivot["first"] - 1).dropna()
    if growth.empty:
        return []
    moved = change_words(growth.min(), growth.max(), "rises by", "falls by", "changes by")
    why = (
        "In the first step AdamW's m and v are created after backward has freed the activations; from the second "
        "step on they are live through forward and backward, on top of the activations."
        if growth.max() > 0
        else ""
    )
    line = f"- Train step, steady state against the first step: the peak {moved} over precisions and contexts."
    return [f"{line} {why}" if why else line, ""]


def _precision_ratio(rows: pd.DataFrame) -> list[str]:
    """The steady bf16 peak against the fp32 peak per mode, in words that follow the ratio, and where
    the rows split the peak, the part that differs: activations and temporaries (autocast's bf16
    activations, and the bf16 copy of each weight in its cast cache) against the fp32 parts."""
    out = []
    steady = rows[rows["state"] == "steady"]
    for mode, group in steady.groupby("mode"):
        by = group.pivot_table(index="context_length", columns="precision", values="trace_peak_mib")
        if not {"fp32", "bf16"} <= set(by.columns):
            continue
        ratio = (by["bf16"] / by["fp32"]).dropna()
        if ratio.empty:
            continue
        direction = (
            "lower"
            if ratio.max() < 1
            else "higher"
            if ratio.min() > 1
            else "the same"
            if (ratio == 1).all()
            else "lower at some contexts and higher at others"
        )
        contexts = ", ".join(map(str, ratio.index))
        line = (
            f"- {mode}, steady state: the bf16 peak is {span(ratio.min(), ratio.max(), lambda x: pct(x, 0))} of the "
            f"fp32 peak (context{'s' if len(ratio) > 1 else ''} {contexts}), {direction}."
        )
        parts = [AT_PEAK["activations and temporaries"], AT_PEAK["weights"]]
        if set(parts) <= set(group.columns) and group[parts].notna().all(axis=None):
            at = group[group["context_length"] == ratio.index[-1]].set_index("precision")
            line += (
                f" At the peak (context {ratio.index[-1]}), activations and temporaries take "
                f"{num(at.loc['bf16', parts[0]], 1)} MiB in bf16 against {num(at.loc['fp32', parts[0]], 1)} MiB in "
                f"fp32 (autocast's bf16 activations, plus its cast cache's bf16 copy of each weight), while the "
                f"weights stay fp32: {num(at.loc['bf16', parts[1]], 1)} and {num(at.loc['fp32', parts[1]], 1)} MiB."
            )
        out.append(line)
    return out + [""] if out else []


def _agreement(memory: pd.DataFrame, e2e: pd.DataFrame | None) -> list[str]:
    joined = e2e_agreement(memory, e2e)
    if joined.empty:
        return [
            "The e2e study measured none of these points at this commit, so the steady-state peaks have no "
            "independent cross-check in this run.",
            "",
        ]
    joined = joined.sort_values(["mode", "precision", "context_length"])
    worst, target = joined["difference"].abs().max(), setting(memory, "e2e_agreement")
    on_gpu = joined["allocator_peak_mib"].notna().all()
    how = (
        "then one more step with the allocator's peak statistics reset"
        if on_gpu
        else "then one more step traced by torch.profiler, its most held at once added to the tensors that live "
        "between steps"
    )
    return [
        f"Cross-check: the steady-state {'allocator' if on_gpu else 'trace'} peak here against the e2e study's peak "
        f"for the same point, measured at the same commit (eager, naive attention; a separate process that ran "
        f"warm-up steps, {how}):",
        "",
        table(
            pd.DataFrame(
                {
                    "mode": joined["mode"],
                    "precision": joined["precision"],
                    "context": joined["context_length"],
                    "memory study (MiB)": joined["memory_mib"].map(lambda x: num(x, 1)),
                    "e2e study (MiB)": joined["e2e_mib"].map(lambda x: num(x, 1)),
                    "difference": joined["difference"].map(pct),
                    "commit": joined["commit"],
                }
            )
        ),
        "",
        f"- Largest difference {pct(worst)} (target: within {share(target)}: "
        f"**{'met' if worst <= target else 'not met'}**).",
        "",
    ]


def _budget(rows: pd.DataFrame) -> list[str]:
    """The steady-state peak of the fp32 train step at the largest context, reconciled."""
    train = rows[(rows["mode"] == "train_step") & (rows["precision"] == "fp32") & (rows["state"] == "steady")]
    if (
        train.empty
        or not set(AT_PEAK.values()) <= set(train.columns)
        or train[list(AT_PEAK.values())].isna().any(axis=None)
    ):
        return []
    row = train.sort_values("context_length").iloc[-1]
    params = row["params"]
    computed = {"weights": 4 * params / 2**20, "optimizer state": 8 * params / 2**20}
    parts = {name: row[col] for name, col in AT_PEAK.items()}
    total = sum(parts.values())
    # on CUDA the allocator's peak is a second count of the same step; a CPU has only the trace the parts come from
    against = (
        f"The parts sum to {num(total, 1)} MiB against the allocator's peak of {num(row['allocator_peak_mib'], 1)} "
        f"MiB: {pct(total / row['allocator_peak_mib'] - 1)}. "
        if pd.notna(row.get("allocator_peak_mib"))
        else f"The parts sum to the trace's peak, {num(total, 1)} MiB. "
    )
    lines = [
        f"Budget of the steady-state fp32 train step at context {int(row['context_length'])} "
        f"({num(params / 1e6, 1)} M parameters). At the step's peak (during {row['peak_stage']}), the live "
        "allocations of the trace fall into:",
        "",
        table(
            pd.DataFrame(
                {
                    "part": list(parts),
                    "live at the peak (MiB)": [num(v, 1) for v in parts.values()],
                    "computed (MiB)": [num(computed[p], 1) if p in computed else "—" for p in parts],
                    "how computed": [
                        "4 B × parameters"
                        if p == "weights"
                        else "AdamW m and v: 8 B × parameters"
                        if p == "optimizer state"
                        else "—"
                        for p in parts
                    ],
                }
            )
        ),
        "",
        f"- {against}Weights and optimizer state in the trace against their computed sizes: "
        f"{pct(parts['weights'] / computed['weights'] - 1)} and "
        f"{pct(parts['optimizer state'] / computed['optimizer state'] - 1)}.",
        "",
    ]
    return lines


def _largest(rows: pd.DataFrame, allocations: pd.DataFrame) -> list[str]:
    if allocations.empty:
        return []
    biggest = rows.sort_values(["context_length", "trace_peak_mib"]).iloc[-1]
    pick = allocations[
        (allocations["mode"] == biggest["mode"])
        & (allocations["precision"] == biggest["precision"])
        & (allocations["context_length"] == biggest["context_length"])
    ].head(10)
    unnamed = int((pick["what"].fillna("") == "").sum()) if "what" in pick else len(pick)
    return [
        f"Largest allocations (top {share(setting(allocations, 'largest_share'))} by size; first ten) of "
        f"{biggest['mode']}, {biggest['precision']}, "
        f"context {int(biggest['context_length'])}, over all recorded steps. *What* is named by shape "
        "(a size equal to the bytes of one tensor the step makes, at an element width) and, for "
        "parameter-sized blocks, by the phase that made them; *made by* is the innermost frame of our code "
        "(the op's name where torch.profiler recorded it):",
        "",
        table(
            pd.DataFrame(
                {
                    "size (MiB)": pick["size_mib"].map(lambda x: num(x, 2)),
                    "count": pick["count"],
                    "what": pick["what"].fillna("").replace("", "— (no shape rule matches)"),
                    "made by": pick["frame"].fillna("").replace("", "— (no Python frame of ours)"),
                }
            )
        ),
        "",
        f"- {len(pick) - unnamed} of these {len(pick)} are named.",
        "",
    ]
