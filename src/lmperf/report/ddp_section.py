"""The report's "Data parallel training", "Optimizer state sharding" and "Communication accounting"
sections, from results/ddp_train.csv, results/ddp/sharding.csv, results/comm_fit.csv,
results/ddp/timeline.csv and lmperf.distributed.accounting.

Claims follow the statistics: a variant is faster or slower than torch DDP only where the paired
CI of the ratio (measured interleaved) excludes 1; exposed communication (step − local) carries a
bootstrap CI; a share hidden against the naive variant is given only where the naive variant's
exposed communication is resolved from zero.
"""

import numpy as np
import pandas as pd

from lmperf import grid
from lmperf.distributed.accounting import (
    GB,
    FFNStack,
    Mesh,
    compute_bound_batch,
    devices_needed,
    fsdp_bytes_per_device,
    smallest_fsdp,
)
from lmperf.distributed.bucket_model import fit_contention, fitted_cost, predict_exposed, swept_cost
from lmperf.distributed.ddp import BF16, bucketed_settings
from lmperf.measure.settings import setting
from lmperf.measure.stats import difference_ci, ratio_ci, resolved, split_ms
from lmperf.model import TransformerLM, model_config
from lmperf.report.markdown import change, num, ok, pct, plural, ratio, share, span, table

ORDER = grid.DDP_VARIANTS  # the study's order: local first, the anchor last
ANCHOR = "torch_ddp"
# Ours, which the bucket model describes: every variant but local and torch's
MODELLED = tuple(v for v in ORDER if v != "local" and not v.startswith(ANCHOR))
BUCKET_GRID_MB = np.geomspace(0.25, 4096, 29)  # where the model looks for its optimum
CONTENTION_FROM = "individual"  # the overlapping variant whose backward gives the contention: not a bucketed one


def parameter_bytes(size: str, context: int) -> list[int]:
    """fp32 gradient bytes per parameter, in the order the DDP wrappers see them (meta device: no memory)."""
    model = TransformerLM(model_config(size, context), device="meta")
    return [p.numel() * 4 for _, p in model.named_parameters() if p.requires_grad]


def exposed(train: pd.DataFrame) -> pd.DataFrame:
    """Per global batch and variant: exposed communication (median step − local's) with its CI, and
    the median backward and sync times."""
    out = []
    for (_, batch), group in ok(train).groupby(["world_size", "global_batch"]):
        by = group.set_index("variant")
        local = split_ms(by["step_times_ms"].get("local"))
        for variant, row in by.iterrows():
            mine = split_ms(row["step_times_ms"])
            value = low = high = float("nan")
            if local and variant != "local":
                value, low, high = difference_ci(mine, local)
            backward = split_ms(row.get("backward_times_ms"))
            sync = split_ms(row.get("sync_times_ms"))
            out.append(
                {
                    **row.to_dict(),
                    "variant": variant,
                    "global_batch": batch,
                    "exposed_ms": value,
                    "exposed_low_ms": low,
                    "exposed_high_ms": high,
                    "backward_ms": float(np.median(backward)) if backward else float("nan"),
                    "sync_ms": float(np.median(sync)) if sync else float("nan"),
                }
            )
    return pd.DataFrame(out)


def predictions(
    rows: pd.DataFrame, fits: pd.DataFrame | None, sweep: pd.DataFrame | None = None
) -> tuple[pd.Series, dict, str]:
    """Predicted exposed communication (ms) per variant from the all-reduce cost of this backend and
    rank count (the fit; the sweep's medians where the fit was refused) and the local variant's
    measured backward; what the model used; and, where no prediction is made, why."""
    if rows.empty:
        return pd.Series(dtype=float), {}, "no rows"
    first = rows.iloc[0]
    fit, swept = _same_link(fits, first), ok(_same_link(sweep, first))
    local = rows[rows["variant"] == "local"]
    if local.empty:
        return pd.Series(dtype=float), {}, "no local variant measured its backward"
    if len(fit) and fit["status"].iloc[0] == "ok":
        o, w = fit["overhead_us"].iloc[0] / 1e6, fit["bandwidth_gbps"].iloc[0] * 1e9
        cost, source = fitted_cost(o, w), f"the fit, o = {num(o * 1e3, 3)} ms and w = {num(w / 1e9)} GB/s"
    elif len(swept) and swept["bytes"].nunique() >= 2:
        cost = swept_cost(swept["bytes"], swept["median_ms"] / 1e3)
        why = f"the fit was refused ({fit['note'].iloc[0]})" if len(fit) else "no fit was made"
        source = f"the sweep's medians, interpolated between sizes, since {why}"
    else:
        return pd.Series(dtype=float), {}, f"no all-reduce sweep of {first['backend']} with {first['world_size']} ranks"
    backward_s = local["backward_ms"].iloc[0] / 1e3
    sizes = parameter_bytes(first["size"], int(first["context_length"]))
    beside = rows.loc[rows["variant"] == CONTENTION_FROM, "backward_ms"]
    slowdown_s = (beside.iloc[0] / 1e3 - backward_s) if len(beside) else float("nan")
    contention = fit_contention(slowdown_s, CONTENTION_FROM, sizes, backward_s, cost)
    per_byte = contention["seconds_per_byte"] if contention["status"] == "ok" else 0.0
    predicted = {v: predict_exposed(v, sizes, backward_s, cost, per_byte) * 1e3 for v in MODELLED}
    grid = {mb: predict_exposed(f"bucketed-{mb}", sizes, backward_s, cost, per_byte) * 1e3 for mb in BUCKET_GRID_MB}
    best = min(grid, key=grid.get)
    model = {"source": source, "backward_ms": backward_s * 1e3, "best_mb": best, "best_ms": grid[best]}
    return pd.Series(predicted), {**model, "contention": contention}, ""


def _same_link(frame: pd.DataFrame | None, row: pd.Series) -> pd.DataFrame:
    """The rows of an all-reduce table for this row's backend and rank count."""
    if frame is None or frame.empty:
        return pd.DataFrame(columns=["backend", "world_size", "status"])
    return frame[(frame["backend"] == row["backend"]) & (frame["world_size"] == row["world_size"])]


def render_training(
    train: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    timeline: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
) -> list[str]:
    out = ["## Data parallel training", ""]
    if train.empty or "world_size" not in train:
        return out + ["No data-parallel rows were measured.", ""]
    rows = exposed(train)
    if not rows.empty:
        first = rows.iloc[0]
        out += [
            f"{first['size']} model, context {int(first['context_length'])}, fp32, at each world size below. Each "
            "variant runs beside torch DDP in one process, interleaved A B A B: "
            f"{plural(int(first['warmup']), 'warm-up step')}, at least {int(first['min_steps'])} measured, then more "
            f"until the paired CI of variant / torch DDP excludes 1 or {num(first['max_seconds'], 0)} s are spent; a "
            "step's time is the slowest rank's. `local` is the same step with no gradient synchronization, so exposed "
            "communication = step − local (medians, bootstrap CI). Backward and `sync` (the wait for the all-reduces "
            f"after backward) are timed with {clock_of(rows)}; medians." + _bf16_method(rows),
            "",
        ]
    for world, ran in train.groupby("world_size"):
        out += [f"### {plural(int(world), 'rank')}", ""]
        out += _world_size(rows[rows["world_size"] == world] if len(rows) else rows, ran, fits, sweep)
    return out + _timeline_caption(timeline)


def _bf16_method(rows: pd.DataFrame) -> str:
    if not rows["variant"].str.endswith(BF16).any():
        return ""
    return (
        f" Variants ending in `{BF16}` all-reduce the gradients in bf16, half the bytes: ours "
        f"(`bucketed-<MB>{BF16}`) and torch DDP with torch's `bf16_compress_hook`."
    )


def _world_size(rows: pd.DataFrame, ran: pd.DataFrame, fits, sweep) -> list[str]:
    """One world size's tables, one per global batch; or why it was not measured."""
    if rows.empty:
        return [f"Not measured: {_reasons(ran)}.", ""]
    first = rows.iloc[0]
    out = [f"Over {first['backend']} ({first['device_name']}).", ""]
    for batch, group in rows.groupby("global_batch"):
        group = group.sort_values("variant", key=lambda c: c.map({v: i for i, v in enumerate(ORDER)}))
        predicted, model, why_not = predictions(group, fits, sweep)
        out += [
            f"#### Global batch {batch}",
            "",
            table(
                pd.DataFrame(
                    {
                        "variant": group["variant"],
                        "step (ms)": [
                            f"{num(m)} [{num(lo)}, {num(hi)}]"
                            for m, lo, hi in zip(group["median_ms"], group["ci95_low_ms"], group["ci95_high_ms"])
                        ],
                        "steps": group["n_steps"].map(lambda x: str(int(x))),
                        "vs torch DDP": [_versus(r) for r in group.itertuples()],
                        "backward (ms)": group["backward_ms"].map(num),
                        "sync (ms)": group["sync_ms"].map(num),
                        "exposed comm (ms)": [
                            f"{num(v)} [{num(lo)}, {num(hi)}]" if pd.notna(v) else "—"
                            for v, lo, hi in zip(group["exposed_ms"], group["exposed_low_ms"], group["exposed_high_ms"])
                        ],
                        "predicted (ms)": group["variant"].map(lambda v: _predicted_cell(v, predicted, model)),
                        "measured / predicted": [
                            ratio(e / predicted[v]) if v in predicted and predicted[v] > 0 else "—"
                            for v, e in zip(group["variant"], group["exposed_ms"])
                        ],
                    }
                )
            ),
            "",
        ]
        out += _claims(group, predicted, model, why_not)
    return out


def _predicted_cell(variant: str, predicted: pd.Series, model: dict) -> str:
    """The model's exposed communication for a variant; *fitted* where the contention came from it."""
    value = num(predicted.get(variant, float("nan")))
    fitted = model.get("contention", {})
    return f"{value} *fitted*" if fitted.get("status") == "ok" and fitted.get("variant") == variant else value


def _reasons(rows: pd.DataFrame) -> str:
    """The notes of rows that were not measured, each once."""
    notes = rows["note"].dropna().astype(str) if "note" in rows else pd.Series(dtype=str)
    return "; ".join(dict.fromkeys(n for n in notes if n)) or "no rows"


def on_gpu(rows: pd.DataFrame) -> bool:
    """Whether the ranks ran on GPUs (their backward and sync then timed with CUDA events)."""
    return "device_type" in rows and (rows["device_type"] == "cuda").any()


def clock_of(rows: pd.DataFrame) -> str:
    """The clock that timed backward and sync: CUDA events on GPUs, the host clock on CPU ranks."""
    return "CUDA events" if on_gpu(rows) else "the host clock"


def _versus(row) -> str:
    if row.variant == "torch_ddp" or pd.isna(getattr(row, "vs_anchor_ci95_low", float("nan"))):
        return "—"
    verdict = "" if resolved(row.vs_anchor_ci95_low, row.vs_anchor_ci95_high) else " (not resolved)"
    return f"{num(row.vs_anchor, 3)} [{num(row.vs_anchor_ci95_low, 3)}, {num(row.vs_anchor_ci95_high, 3)}]{verdict}"


def _claims(group: pd.DataFrame, predicted: pd.Series, model: dict, why_not: str) -> list[str]:
    by = group.set_index("variant")
    out = _fastest_bucketed(by) + _hidden_lines(by) + _backward_beside(by, group) + _hook_lines(by) + _bf16_lines(by)
    factor = setting(group, "bucket_model_factor")
    return out + _model_lines(by, predicted, model, why_not, factor) + [""]


def _bf16_lines(by: pd.DataFrame) -> list[str]:
    """Ours with bf16 buckets against torch DDP with torch's bf16 hook: the two ran in separate
    pairings, so the ratio of their steps has an unpaired CI."""
    theirs = ANCHOR + BF16
    ours = [v for v in by.index if v.startswith("bucketed-") and v.endswith(BF16)]
    if theirs not in by.index or not ours:
        return []
    parts = []
    for variant in ours:
        value, low, high = ratio_ci(
            split_ms(by.loc[variant, "step_times_ms"]), split_ms(by.loc[theirs, "step_times_ms"]), paired=False
        )
        verdict = ("faster" if value < 1 else "slower") if resolved(low, high) else "not resolved"
        parts.append(f"{variant} {num(value, 3)}× [{num(low, 3)}, {num(high, 3)}] ({verdict})")
    return [f"- bf16 communication, step time against {theirs}'s (unpaired CI): " + "; ".join(parts) + "."]


def ours_in_fp32(variants: pd.Index | pd.Series):
    """Which variants are our bucketed ones communicating in fp32, the handout's (bf16 communication is
    compared on its own line)."""
    return variants.str.startswith("bucketed") & ~variants.str.endswith(BF16)


def _fastest_bucketed(by: pd.DataFrame) -> list[str]:
    """Of ours in fp32 against torch DDP (bf16 communication is compared on its own line)."""
    bucketed = by[ours_in_fp32(by.index) & by["vs_anchor"].notna()]
    if bucketed.empty or ANCHOR not in by.index:
        return []
    best = bucketed["median_ms"].idxmin()
    row = bucketed.loc[best]
    if resolved(row["vs_anchor_ci95_low"], row["vs_anchor_ci95_high"]):
        faster = row["vs_anchor"] < 1
        return [
            f"- Fastest bucketed variant: **{best}**, {pct(abs(row['vs_anchor'] - 1))} "
            f"{'faster' if faster else 'slower'} than torch DDP (paired CI "
            f"[{num(row['vs_anchor_ci95_low'], 3)}, {num(row['vs_anchor_ci95_high'], 3)}])."
        ]
    return [
        f"- Fastest bucketed variant by median: {best}; against torch DDP its ratio "
        f"{num(row['vs_anchor'], 3)} has a CI [{num(row['vs_anchor_ci95_low'], 3)}, "
        f"{num(row['vs_anchor_ci95_high'], 3)}] that holds 1: **not resolved at this batch**."
    ]


def hidden_shares(by: pd.DataFrame) -> tuple[dict[str, float], list[str]] | None:
    """The share of the naive variant's exposed communication each overlapping variant hides
    (negative: exposes more), for those whose step time is resolved from naive's, and the variants
    that are not; None where naive's exposed communication is not resolved from zero."""
    naive = by.loc["naive"]
    if not resolved(naive["exposed_low_ms"], naive["exposed_high_ms"], 0.0):
        return None
    hidden, unresolved = {}, []
    for v in (v for v in MODELLED[2:] if v in by.index):
        _, low, high = difference_ci(split_ms(by.loc[v, "step_times_ms"]), split_ms(naive["step_times_ms"]))
        if resolved(low, high, 0.0):
            hidden[v] = 1 - by.loc[v, "exposed_ms"] / naive["exposed_ms"]
        else:
            unresolved.append(v)
    return hidden, unresolved


def _hidden_lines(by: pd.DataFrame) -> list[str]:
    if "naive" not in by.index or pd.isna(by.loc["naive", "exposed_low_ms"]):
        return []
    shares = hidden_shares(by)
    if shares is None:
        return [
            "- The naive variant's exposed communication is not resolved from zero at this batch, so no "
            "share hidden against it is given."
        ]
    hidden, unresolved = shares
    against = f"- Against the naive variant's {num(by.loc['naive', 'exposed_ms'])} ms of exposed communication, "
    hides = {v: h for v, h in hidden.items() if h >= 0}
    adds = {v: -h for v, h in hidden.items() if h < 0}
    out = [against + ", ".join(f"{v} hides {pct(h)}" for v, h in hides.items()) + "."] if hides else []
    out += [against + ", ".join(f"{v} exposes {pct(h)} more" for v, h in adds.items()) + "."] if adds else []
    if unresolved:
        out.append(
            f"- {', '.join(unresolved)}: step time not resolved from the naive variant's, so no share hidden is given."
        )
    return out


def _backward_beside(by: pd.DataFrame, group: pd.DataFrame) -> list[str]:
    if "local" not in by.index:
        return []
    local = split_ms(by.loc["local", "backward_times_ms"])
    slower = []
    for variant in ("individual", "torch_ddp"):
        if variant in by.index and local:
            value, low, high = ratio_ci(split_ms(by.loc[variant, "backward_times_ms"]), local, paired=False)
            slower.append(
                f"{variant} {num(value, 3)}× [{num(low, 3)}, {num(high, 3)}]"
                + ("" if resolved(low, high) else " (not resolved)")
            )
    if not slower:
        return []
    return [
        f"- Backward beside the all-reduces, against local's backward (ratio of medians, {clock_of(group)}): "
        + "; ".join(slower)
        + "."
    ]


def exposed_resolved(by: pd.DataFrame) -> pd.Series:
    """Which variants' exposed communication is resolved above zero (its CI's low end): a ratio to a
    prediction, or a best size, means something only for those."""
    return by["exposed_low_ms"].fillna(0) > 0


def _hook_lines(by: pd.DataFrame) -> list[str]:
    """Host time in our wrappers' gradient hooks per step (launching all-reduces, filling buckets)."""
    if "hook_times_ms" not in by:
        return []
    medians = {v: float(np.median(t)) for v, t in by["hook_times_ms"].map(split_ms).items() if t}
    overlapped = {v: ms for v, ms in medians.items() if v in MODELLED[2:]}  # ours with hooks: past naive and flat
    if not overlapped:
        return []
    return [
        "- Host time in our gradient hooks per step (median over the steps, the slowest rank's; host clock): "
        + ", ".join(f"{v} {num(ms)} ms" for v, ms in overlapped.items())
        + "."
    ]


def model_ratios(by: pd.DataFrame, predicted: pd.Series) -> list[float]:
    """Measured over predicted exposed communication, per bucketed variant with both, its measured
    exposed communication resolved above zero."""
    above = exposed_resolved(by)
    return [
        by.loc[v, "exposed_ms"] / predicted[v]
        for v in predicted.index
        if v.startswith("bucketed") and v in by.index and predicted[v] > 0 and above[v]
    ]


def _model_lines(by: pd.DataFrame, predicted: pd.Series, model: dict, why_not: str, factor: float) -> list[str]:
    if not model:
        return [f"- No bucket-model prediction: {why_not}."]
    above = exposed_resolved(by)
    measured = by[ours_in_fp32(by.index) & above]["exposed_ms"]
    out = [
        f"- Bucket model: buckets formed as DDPBucketed forms them, local's backward of "
        f"{num(model['backward_ms'])} ms, each all-reduce's time from {model['source']}, and "
        f"{_contention_words(model['contention'])}. Predicted optimum **{_mb(model['best_mb'])} MB** "
        f"({num(model['best_ms'])} ms exposed)"
        + (f", measured best **{measured.idxmin()}** ({num(measured.min())} ms)." if len(measured) else ".")
    ]
    unresolved = [v for v in predicted.index if v.startswith("bucketed") and v in by.index and not above[v]]
    if unresolved:
        out.append(
            f"- {', '.join(unresolved)}: exposed communication not resolved above zero, so no ratio to the model."
        )
    if model["contention"]["status"] == "ok":
        out.append(
            "- The contention is one number for every bucket size, so the predictions of different sizes differ "
            "only in the all-reduces left after backward; it is fitted from "
            f"{model['contention']['variant']}, whose own prediction is marked *fitted* in the table."
        )
    ratios = model_ratios(by, predicted)
    if ratios:
        within = all(1 / factor <= r <= factor for r in ratios)
        out.append(
            f"- Bucketed variants, measured / predicted exposed communication: {span(min(ratios), max(ratios))}× "
            f"(target: within a factor of {factor:g}: **{'met' if within else 'not met'}**)."
        )
        if not within:
            out += _why_the_model_misses(by, predicted)
    return out + _best_size_line(measured, model, factor)


def _mb(size: float) -> str:
    """A bucket size in MB, to the precision the model's grid of sizes has (0.25 MB, 4096 MB)."""
    return num(size, 2 if size < 10 else 0)


def _best_size_line(measured: pd.Series, model: dict, factor: float) -> list[str]:
    """The predicted best bucket size against the measured best of the sizes run (fp32 buckets)."""
    if measured.empty:
        return []
    best = measured.idxmin()
    size_mb = bucketed_settings(best)[0]
    apart = max(model["best_mb"] / size_mb, size_mb / model["best_mb"])
    edge = model["best_mb"] in (BUCKET_GRID_MB[0], BUCKET_GRID_MB[-1])
    searched = (
        f"; the prediction is at the edge of the sizes searched, {_mb(BUCKET_GRID_MB[0])}-{_mb(BUCKET_GRID_MB[-1])} MB"
    )
    return [
        f"- Best bucket size: predicted {_mb(model['best_mb'])} MB, measured {_mb(size_mb)} MB ({best}, the "
        f"least exposed of the sizes run): a factor of {num(apart, 1)} apart (target: within a factor of "
        f"{factor:g}: **{'met' if apart <= factor else 'not met'}**){searched if edge else ''}."
    ]


def _contention_words(fit: dict) -> str:
    """How the model slows backward beside the all-reduces: the fitted contention, or why none."""
    if fit["status"] != "ok":
        return f"a backward as fast beside the all-reduces as alone (no contention fitted: {fit['note']})"
    return (
        f"a backward slowed by {num(fit['seconds_per_byte'] * 1e3 * 2**30, 3)} ms per GiB all-reduced while it runs, "
        f"fitted in this run from {fit['variant']}'s backward, {num(fit['slowdown_ms'])} ms longer than local's "
        f"with {num(fit['bytes_in_flight'] / 2**30, 3)} GiB in flight"
    )


def _why_the_model_misses(by: pd.DataFrame, predicted: pd.Series) -> list[str]:
    """The model's two assumptions against the bucketed variants' own CUDA-event timings: backward
    as fast beside the all-reduces as alone (local's), and a wait after backward of only the
    predicted tail. Backward's slowdown plus that wait should account for the exposed communication;
    how much of it they do is a check that can fail."""
    variants = [v for v in predicted.index if v.startswith("bucketed") and v in by.index]
    if "local" not in by.index or not variants:
        return []
    rows = by.loc[variants]
    slowdown = rows["backward_ms"] - by.loc["local", "backward_ms"]
    share = (slowdown + rows["sync_ms"]) / rows["exposed_ms"]
    if slowdown.isna().all() or share.isna().all():
        return []
    backward = (
        change(
            slowdown.min(),
            slowdown.max(),
            "backward runs longer than local's by",
            "backward runs shorter than local's by",
            "backward's time differs from local's by",
            show=num,
        )
        + " ms"
    )
    shared = "the GPU" if on_gpu(rows) else "the CPU cores"
    return [
        f"- Why the model misses, from the same steps' timings ({clock_of(rows)}): it assumes backward runs as "
        "fast beside the all-reduces as without them, and that only the last all-reduces wait after backward. "
        f"Measured, {backward}, and the wait after backward is {span(rows['sync_ms'].min(), rows['sync_ms'].max())} "
        f"ms against a predicted {span(predicted[variants].min(), predicted[variants].max())} ms"
        + (f": compute and communication share {shared} and slow each other" if slowdown.max() > 0 else "")
        + f". Together the two account for {span(share.min(), share.max(), pct)} of each variant's exposed "
        "communication."
    ]


def _timeline_caption(timeline: pd.DataFrame | None) -> list[str]:
    title = "Kernel timeline of one training step, naive vs overlapped DDP"
    if timeline is None or ok(timeline).empty:
        notes = timeline["note"].dropna() if timeline is not None and "note" in timeline else pd.Series(dtype=str)
        return [f"*{title}: not drawn, {notes.iloc[0] if len(notes) else 'no timeline was recorded'}.*", ""]
    out = [f"![{title}](figures/ddp_timeline.png)", ""]
    if "traced_step_ms" not in timeline:
        return out
    steps = ok(timeline).drop_duplicates("variant")
    return out + [
        "The timeline is " + steps["profiler"].iloc[0] + "'s kernel trace of one step on rank 0. Tracing "
        "costs time: "
        + "; ".join(
            f"{r.variant} {num(r.traced_step_ms)} ms traced against {num(r.untraced_step_ms)} ms untraced (median)"
            for r in steps.itertuples()
        )
        + ".",
        "",
    ]


def sharding_numbers(by: pd.DataFrame) -> dict:
    """What sharding the optimizer state saves and costs, from the sharded and unsharded rows: the
    state it should remove per rank, the memory after the step it did remove, the unsharded
    parameters + gradients + state, and the optimizer step's change (and whether the CIs overlap)."""
    sharded, unsharded = by.loc["sharded"], by.loc["unsharded"]
    return {
        "should": unsharded["optimizer_state_mib"] - sharded["optimizer_state_mib"],
        "saved": unsharded["allocated_after_step_mib"] - sharded["allocated_after_step_mib"],
        "budget": by.loc["unsharded", ["param_mib", "grad_mib", "optimizer_state_mib"]].sum(),
        "difference": sharded["optimizer_median_ms"] - unsharded["optimizer_median_ms"],
        "overlap": not (
            sharded["optimizer_ci95_low_ms"] > unsharded["optimizer_ci95_high_ms"]
            or sharded["optimizer_ci95_high_ms"] < unsharded["optimizer_ci95_low_ms"]
        ),
    }


def _sharding_tables(by: pd.DataFrame) -> list[str]:
    def ci(r, prefix=""):
        return f"{num(r[f'{prefix}median_ms'])} [{num(r[f'{prefix}ci95_low_ms'])}, {num(r[f'{prefix}ci95_high_ms'])}]"

    times = pd.DataFrame(
        {
            "": by.index,
            "step (ms)": [ci(r) for _, r in by.iterrows()],
            "optimizer step (ms)": [ci(r, "optimizer_") for _, r in by.iterrows()],
            "local update (ms)": [
                ci(r, "local_update_") if pd.notna(r.get("local_update_median_ms")) else "—" for _, r in by.iterrows()
            ],
            "broadcasts (ms)": [
                ci(r, "broadcast_") if pd.notna(r.get("broadcast_median_ms")) else "—" for _, r in by.iterrows()
            ],
        }
    )
    memory = pd.DataFrame(
        {
            "memory (MiB)": by.index,
            "optimizer state": by["optimizer_state_mib"].map(lambda x: num(x, 0)),
            "allocated before step": by["allocated_before_step_mib"].map(lambda x: num(x, 0)),
            "allocated after step": by["allocated_after_step_mib"].map(lambda x: num(x, 0)),
            "peak during step": by["peak_during_step_mib"].map(lambda x: num(x, 0)),
        }
    )
    return [table(times), "", table(memory), ""]


def _sharding_lines(by: pd.DataFrame, ranks: int, target: float) -> list[str]:
    n = sharding_numbers(by)
    sharded, unsharded = by.loc["sharded"], by.loc["unsharded"]
    should, saved, difference = n["should"], n["saved"], n["difference"]
    return [
        f"- Computed breakdown, unsharded: parameters + gradients + AdamW state = {num(n['budget'], 0)} MiB against "
        f"{num(unsharded['allocated_after_step_mib'], 0)} MiB allocated after the step.",
        f"- Sharding should remove {num(should, 0)} MiB of optimizer state per rank; memory after the step is "
        f"{num(abs(saved), 0)} MiB {'lower' if saved >= 0 else 'higher'}, **{pct(saved / should)}** of it "
        f"(target: ≥ {share(target)}: **{'met' if saved >= target * should else 'not met'}**).",
        f"- The optimizer step goes from {num(unsharded['optimizer_median_ms'])} ms to "
        f"{num(sharded['optimizer_median_ms'])} ms "
        f"({'+' if difference >= 0 else '−'}{num(abs(difference))} ms"
        + (", CIs overlap: not resolved)." if n["overlap"] else ").")
        + f" Of the sharded step, the shard's update takes {num(sharded.get('local_update_median_ms'))} ms and the "
        f"broadcasts {num(sharded.get('broadcast_median_ms'))} ms: sharding the update over {ranks} ranks can save "
        f"at most {num(unsharded['optimizer_median_ms'] * (1 - 1 / ranks))} ms, before the broadcasts are paid.",
        "- Unlike ZeRO stage 1, gradients are still all-reduced in full (every rank holds every gradient), and "
        "updated parameters travel by one broadcast per parameter from its owner rather than one all-gather; "
        "ZeRO-1 reduce-scatters gradients so each rank receives only its shard's.",
        "",
    ]


def render_sharding(sharding: pd.DataFrame) -> list[str]:
    """The method, then per world size the tables and lines, or why it was not measured. Rows with no
    world size (CPU runs that predate it) are one group."""
    out = ["## Optimizer state sharding", ""]
    rows = ok(sharding)
    if rows.empty or "world_size" not in sharding:
        return out + [f"Not measured: {_reasons(sharding)}.", ""]
    out += [
        f"{rows['size'].iloc[0]} model, torch.optim.AdamW; gradients synchronized by DDPIndividualParameters (no "
        "buffers of its own), so the runs differ only in where the optimizer state lives. Times: medians with "
        "bootstrap 95% CIs, slowest rank; the sharded optimizer step splits into the update of this rank's shard "
        "and the parameter broadcasts. Memory is rank 0's allocator, in MiB.",
        "",
    ]
    for world, group in sharding.groupby(sharding["world_size"].fillna(0)):
        measured = ok(group)
        out += [f"### {plural(int(world), 'rank')}" if world else "### Ranks not recorded", ""]
        if len(measured) < 2:
            out += [f"Not measured: {_reasons(group)}.", ""]
            continue
        by = measured.set_index(
            measured["sharded"].astype(str).str.lower().map({"true": "sharded", "false": "unsharded"})
        )
        target = setting(measured, "sharding_saved_share")
        out += _sharding_tables(by) + _sharding_lines(by, int(world), target)
    return out


def render_accounting() -> list[str]:
    model, mesh = FFNStack(), Mesh()
    state = model.state_bytes()
    total = sum(state.values())
    bound = compute_bound_batch(model, mesh)
    tokens = int(round(bound["batch_tokens"]))
    act = model.activation_bytes_per_token()
    n = smallest_fsdp(model, 95 * GB, 0)
    n_at_batch = smallest_fsdp(model, 95 * GB, tokens)
    at_batch = (
        f"at the {tokens:,}-token batch of (c) it takes N = {n_at_batch}"
        if n_at_batch
        else f"at the {tokens:,}-token batch of (c) the unsharded half of the activations alone is "
        f"{num(act * tokens / 2 / GB, 0)} GB, so no N fits without sharding or recomputing all of them"
    )
    out = [
        "## Communication accounting (XXL, computed)",
        "",
        f"XXL: d_model {model.d_model}, d_ff {model.d_ff}, {model.blocks} blocks of two linear layers: "
        f"{num(model.params / 1e9, 1)} B parameters (`lmperf.distributed.accounting`).",
        "",
        table(pd.DataFrame({"part (fp32)": list(state), "GB": [num(b / GB, 0) for b in state.values()]})),
        "",
        f"- (a) Weights, gradients and AdamW state take **{num(total / GB, 0)} GB**, "
        f"{devices_needed(total, 80 * GB)} H100s (80 GB) worth. Saved for backward in bf16: each block's input and "
        f"hidden activation, {num(act / 2**20, 2)} MiB per token ({num(act * tokens / GB, 0)} GB at the "
        f"{tokens:,}-token batch of (c)).",
        f"- (b) With weights, gradients, optimizer state and half of the activations sharded over N devices, "
        f"per-device memory is (state + activations/2)/N + activations/2. The state alone fits 95 GB from "
        f"**N = {n}** ({num(fsdp_bytes_per_device(model, n, 0) / GB, 1)} GB per device); {at_batch}.",
        f"- (c) Forward pass on a TPU v5p mesh, FSDP X = {mesh.x}, TP Y = {mesh.y}, M_X = {mesh.m_x}, M_Y = "
        f"{mesh.m_y}, "
        f"C = {mesh.c:.2e} FLOP/s, W_ici = {mesh.w_ici:.2e} B/s (α = C/W = {num(bound['alpha'], 0)}): compute-bound "
        f"needs B ≥ X·α/M_X = **{tokens:,} tokens** overall, **{num(bound['per_device_tokens'], 0)} per device**; "
        f"the TP condition d_ff ≥ Y·α/M_Y = {num(bound['tp_condition_d_ff'], 0)} "
        f"{'holds' if bound['tp_bound_ok'] else 'fails'} for d_ff = {model.d_ff}.",
        "- (d) To keep the batch small without becoming communication-bound: overlap the FSDP weight gathers "
        "with the previous layer's compute (prefetching), use pipeline parallelism across nodes so each "
        "device holds fewer layers, communicate in lower precision, and use faster links for the "
        "bandwidth-hungry axis (tensor parallelism inside an NVLink/ICI domain).",
        "",
    ]
    return out


def render(
    train: pd.DataFrame,
    sharding: pd.DataFrame,
    fits: pd.DataFrame | None = None,
    timeline: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
) -> str:
    return "\n".join(render_training(train, fits, timeline, sweep) + render_sharding(sharding) + render_accounting())
