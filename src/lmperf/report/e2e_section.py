"""The report's "End-to-end benchmarking" section: the handout's benchmarking questions from data.

Tables show the handout's launched timing and the GPU's own (graphed) time side by side; every
computed sentence uses graphed times and is stated per regime (precision x compile mode).
"""

import pandas as pd

from lmperf import grid
from lmperf.measure.settings import setting
from lmperf.report.attention_kernels import kernels_sentence
from lmperf.report.e2e_analysis import (
    GPU_MS,
    attention_ratios,
    backward_ratio,
    describe_trend,
    gpu_bound,
    handout_model,
    launched_against,
    optimizer_bandwidth,
    physics_violations,
    speedup,
    timer_agreement,
    trend_with_size,
    warmup_steps_cost,
)
from lmperf.report.holds import sooner_clause
from lmperf.report.markdown import num, ok, pct, plural, ratio, share, span, table, text
from lmperf.report.style import MODE_LABELS, sort_by_size

MODES = list(grid.MODES)


def _ci_cell(median, low, high) -> str:
    return "—" if median != median else f"{num(median)} ({num(low)}–{num(high)})"


SHORT_MODES = {"forward": "fwd", "forward_backward": "fwd+bwd", "train_step": "train step"}


def step_time_table(e2e: pd.DataFrame, precision: str, compile_: str, attention: str = "naive") -> pd.DataFrame:
    """size x context rows; per mode the launched median (CI) ms, marked † where host-bound, and the
    graphed median (CI) ms; the graphed columns only where some step was graphed (a CUDA device)."""
    rows = e2e[(e2e["precision"] == precision) & (e2e["compile"] == compile_) & (e2e["attention"] == attention)]
    out = []
    for (size, ctx), point in rows.groupby(["size", "context_length"], sort=False):
        by_mode = point.set_index("mode")
        record = {"size": size, "context": ctx}
        for mode in MODES:
            launched, graphed = f"{SHORT_MODES[mode]} launched", f"{SHORT_MODES[mode]} graphed"
            if mode not in by_mode.index:
                record[launched] = record[graphed] = "—"
                continue
            r = by_mode.loc[mode]
            if r["status"] != "ok":
                record[launched] = record[graphed] = r["status"].upper()
                continue
            mark = " †" if r.get("host_bound") == True else ""  # noqa: E712 - a bool, or NaN where not graphed
            record[launched] = _ci_cell(r["median_ms"], r["ci95_low_ms"], r["ci95_high_ms"]) + mark
            record[graphed] = _ci_cell(
                r.get(GPU_MS, float("nan")), r.get("graphed_ci95_low_ms"), r.get("graphed_ci95_high_ms")
            )
        out.append(record)
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    if gpu_bound(e2e).empty:
        frame = frame.drop(columns=[c for c in frame.columns if c.endswith(" graphed")])
    return sort_by_size(frame, ["size", "context"])


def _regimes(frame: pd.DataFrame):
    """(precision, compile, rows) per regime present, in a fixed order."""
    for precision in grid.PRECISIONS:
        for compile_ in grid.COMPILE_MODES:
            rows = frame[(frame["precision"] == precision) & (frame["compile"] == compile_)]
            if len(rows):
                yield precision, compile_, rows


def _method(e2e: pd.DataFrame) -> str:
    first = ok(e2e).iloc[0] if len(ok(e2e)) else e2e.iloc[0]
    commits = ", ".join(f"`{c}`" for c in sorted(e2e["commit"].dropna().astype(str).unique()))
    device = (
        f"Device **{first['device_name']}**, torch {first['torch_version']}, CUDA {text(first['cuda_version'])}, "
        f"Triton {text(first['triton_version'])}, driver {text(first['driver_version'])}"
        if first.get("device_type") != "cpu"
        else f"Device **{first['device_name']}** (CPU), torch {first['torch_version']}"
    )
    steps = (
        f"{plural(int(first['warmup_steps']), 'warm-up step')}, then at least "
        f"{plural(int(first['measured_steps']), 'measured step')}"
    )
    common = (
        f"{device}, commit {commits}; batch {first['batch_size']}, optimizer `{first['optimizer']}` AdamW"
        f"{learning_rates(e2e)}, fp32 matmul precision `{first['matmul_precision']}`. "
    )
    target = f"within ±{share(setting(e2e, 'ci_halfwidth'))}"
    scope = (
        "*Compiled* means each Transformer block under `torch.compile` (regional compilation); *forward* is "
        "inference under `torch.no_grad()`; *train step* is forward, cross-entropy, backward and the optimizer step."
        + naive_alone(e2e)
        + eager_alone(e2e)
    )
    if gpu_bound(e2e).empty:
        return (
            common + f"Each step is timed as the handout asks: {steps}, each synchronized and timed with "
            f"`timeit.default_timer`, repeated until the median's bootstrap 95% CI is {target} or the point's time "
            "budget is spent. Cells show the median (95% CI) in ms. " + scope + " No step of this run was replayed "
            "as a CUDA graph (that needs a CUDA device), so the comparisons built on graphed times (physics checks, "
            "the backward ratio, the bf16 and torch.compile speed-ups, MFU, the optimizer's bandwidth) are left out."
        )
    return (
        common + "Each step is timed two ways in the same process. **Launched**, the handout's "
        f"method: {steps}, each synchronized and timed with `timeit.default_timer`; on a slow host this measures the "
        "host launching kernels. **Graphed**: the same step captured once as a CUDA graph and replayed, the GPU's own "
        "time (the optimizer is capturable, so the replay runs the launched step's kernels). Both repeat until the "
        f"median's bootstrap 95% CI is {target} or the point's time budget is spent. " + replay_turns(e2e) + "Cells "
        "show the median (95% CI) "
        f"in ms; † marks a host-bound row, launched more than {share(setting(e2e, 'host_bound_threshold'))} over "
        "graphed. " + scope + " Conclusions below use "
        "graphed times, per precision and compile mode."
    )


def _physics_sentence(e2e: pd.DataFrame) -> str:
    rows = gpu_bound(e2e)
    if rows.empty:
        return "No graphed timings (CUDA graphs need a CUDA device), so the physics checks have nothing to check."
    slack = setting(e2e, "physics_slack")
    bad = physics_violations(e2e)
    checks = (
        "train step ≥ forward+backward ≥ forward at every point, and no time falling as the context or the "
        f"model grows ({share(slack)} slack)"
    )
    if bad.empty:
        return f"Physics check on graphed times, {len(rows)} rows: {checks}: no violation."
    listed = "; ".join(
        f"{r.kind} ({r.size}, ctx {r.context_length}, {r.precision}, {r.compile}, {r.attention})"
        for r in bad.head(8).itertuples()
    )
    return f"Physics check on graphed times, {len(rows)} rows: {checks}: **{len(bad)} violations**: {listed}."


def _host_sentence(e2e: pd.DataFrame) -> str:
    rows = gpu_bound(e2e)
    if rows.empty:
        return ""
    parts = []
    for precision, compile_, group in _regimes(rows):
        overhead = (group["host_overhead_ms"] / group["median_ms"]).median()
        parts.append(
            f"{precision} {compile_}: {int(group['host_bound'].astype(bool).sum())} of {len(group)} rows "
            f"host-bound, median launch overhead {pct(overhead)} of the launched time"
        )
    return (
        "Launched against graphed: " + "; ".join(parts) + ". Where a row is host-bound, its launched time "
        "measures Python and the driver launching kernels, not the GPU."
    )


def _ci_sentence(e2e: pd.DataFrame) -> str:
    rows = gpu_bound(e2e)
    if rows.empty:
        return ""
    target = setting(e2e, "ci_halfwidth")
    half = (rows["graphed_ci95_high_ms"] - rows["graphed_ci95_low_ms"]) / 2 / rows[GPU_MS]
    launched = ok(e2e)
    launched_half = (launched["ci95_high_ms"] - launched["ci95_low_ms"]) / 2 / launched["median_ms"]
    return (
        f"Repeatability: {pct((half <= target).mean())} of the {len(rows)} graphed medians have a 95% CI within "
        f"±{share(target)} (largest ±{pct(half.max(), 2)}); of the launched medians, "
        f"{pct((launched_half <= target).mean())} do "
        f"(largest ±{pct(launched_half.max(), 2)}), the rest stopped at the time budget."
    )


def _ratio_sentence(e2e: pd.DataFrame) -> str:
    ratios = backward_ratio(e2e)
    if ratios.empty:
        return "No grid point has both a graphed forward and a graphed forward+backward timing."
    parts = [
        f"{precision} {compile_} {num(g['ratio'].median())}× ({span(g['ratio'].min(), g['ratio'].max())}, "
        f"{plural(len(g), 'point')})"
        for precision, compile_, g in _regimes(ratios)
    ]
    return (
        "Forward + backward over forward, graphed, median per regime: " + "; ".join(parts) + ". The FLOP count "
        "predicts 3× (backward = 2× forward); the forward here is inference (`torch.no_grad`), which stores no "
        "activations for backward."
    )


def _speedup_paragraph(
    e2e: pd.DataFrame, column: str, slow: str, fast: str, what: str, per: str
) -> tuple[str, pd.DataFrame]:
    gains = speedup(e2e, column, slow, fast)
    if gains.empty:
        return f"No pair of graphed {slow} and {fast} rows measured at one commit to compare.", gains
    per_size = gains.groupby(["size", "params", per, "mode"], as_index=False)["speedup"].median()
    sentences = []
    for value in sorted(per_size[per].unique()):
        for mode in MODES:
            series = per_size[(per_size[per] == value) & (per_size["mode"] == mode)].sort_values("params")
            if series.empty:
                continue
            rho = trend_with_size(series, "speedup")
            sentences.append(
                f"{MODE_LABELS[mode]}, {value}: {what} is {num(series['speedup'].iloc[0])}× at "
                f"{series['size'].iloc[0]} "
                f"and {num(series['speedup'].iloc[-1])}× at {series['size'].iloc[-1]} (median over contexts), and "
                f"{describe_trend(rho)} (Spearman ρ = {num(rho)})."
            )
    return " ".join(sentences), gains


def _speedup_table(gains: pd.DataFrame, split: str) -> pd.DataFrame:
    wide = gains.pivot_table(index=["size", "context_length"], columns=[split, "mode"], values="speedup").reset_index()
    wide = sort_by_size(wide, ["size", "context_length"])
    out = pd.DataFrame({"size": wide["size"], "context": wide["context_length"]})
    for key in wide.columns[2:]:
        out[f"{MODE_LABELS[key[1]]} ({key[0]})"] = wide[key].map(ratio)
    return out


def mfu_table(e2e: pd.DataFrame) -> pd.DataFrame:
    """MFU on graphed time per size and context, forward+backward and train step, per precision
    (compiled); the launched train step's MFU beside it."""
    rows = gpu_bound(e2e[e2e["compile"] == "compiled"])
    out = []
    for (precision, size, ctx), point in rows.groupby(["precision", "size", "context_length"]):
        by_mode = point.set_index("mode")
        get = lambda mode, col: by_mode.loc[mode, col] if mode in by_mode.index else float("nan")  # noqa: E731
        out.append(
            {
                "precision": precision,
                "size": size,
                "context": ctx,
                "train step graphed (ms)": num(get("train_step", GPU_MS)),
                "MFU fwd+bwd, graphed": pct(get("forward_backward", "graphed_mfu")),
                "MFU train step, graphed": pct(get("train_step", "graphed_mfu")),
                "MFU train step, launched": pct(get("train_step", "mfu")),
            }
        )
    frame = pd.DataFrame(out)
    return frame if frame.empty else sort_by_size(frame, ["precision", "size", "context"])


def _mfu_sentence(e2e: pd.DataFrame) -> str:
    rows = gpu_bound(e2e[e2e["compile"] == "compiled"]).dropna(subset=["graphed_mfu"])
    parts = []
    for (precision, mode), group in rows[rows["mode"] != "forward"].groupby(["precision", "mode"]):
        top = group.loc[group["graphed_mfu"].idxmax()]
        parts.append(
            f"{precision} {MODE_LABELS[mode]} {pct(top['graphed_mfu'])} ({top['size']}, ctx {top['context_length']}, "
            f"against {num(top['peak_tflops'], 1)} TFLOP/s)"
        )
    if not parts:
        return ""
    return (
        "Best graphed MFU, compiled: " + "; ".join(parts) + ". FLOPs per step are 6·N·tokens plus 12·L·B·T²·d for "
        "attention (see `lmperf.measure.flops`); fp32 is measured against the non-tensor-core peak."
    )


def optimizer_table(e2e: pd.DataFrame) -> pd.DataFrame:
    opt = sort_by_size(optimizer_bandwidth(e2e), ["size", "precision", "compile"])
    return pd.DataFrame(
        {
            "size": opt["size"],
            "precision": opt["precision"],
            "compile": opt["compile"],
            "optimizer step (ms)": opt["optimizer_ms"].map(num),
            "GB/s at 28 B/param": opt["gb_per_s"].map(lambda x: num(x, 0)),
            "HBM bound (ms)": opt["bound_ms"].map(num),
            "over the bound": (opt["optimizer_ms"] / opt["bound_ms"]).map(ratio),
        }
    )


def warmup_table(warmup: pd.DataFrame) -> pd.DataFrame:
    """Per (size, mode, warm-up steps): the measured median across processes, its range, the first call."""
    rows = ok(warmup)
    out = []
    for (size, mode, steps), group in rows.groupby(["size", "mode", "warmup_steps"]):
        out.append(
            {
                "size": size,
                "mode": MODE_LABELS[mode],
                "warm-up steps": steps,
                "processes": len(group),
                "median of medians (ms)": num(group["median_ms"].median()),
                "range across processes (ms)": span(group["median_ms"].min(), group["median_ms"].max()),
                "median CV": pct(group["cv"].median()),
                "first call (ms)": num(group["first_step_ms"].median()),
            }
        )
    frame = pd.DataFrame(out)
    return frame if frame.empty else sort_by_size(frame, ["size", "mode", "warm-up steps"])


def _warmup_bullets(warmup: pd.DataFrame, e2e: pd.DataFrame) -> list[str]:
    cost = warmup_steps_cost(warmup)
    lines = []
    for (size, mode), group in cost.groupby(["size", "mode"]):
        steps = ", ".join(
            f"step {int(r.step)} {num(r.median_ratio)}× ({span(r.min_ratio, r.max_ratio)})" for r in group.itertuples()
        )
        line = (
            f"- {size}, {MODE_LABELS[mode]}, no warm-up, {int(group['processes'].iloc[0])} processes: each early step "
            f"over that process's steady median, median across processes (range): {steps}."
        )
        settings = ok(warmup[(warmup["size"] == size) & (warmup["mode"] == mode)])
        spread = settings.groupby("warmup_steps")["median_ms"].agg(lambda s: s.max() / s.min()).max()
        by_setting = settings.groupby("warmup_steps")["median_ms"].median()
        moved = by_setting.max() / by_setting.min()
        line += (
            f" Processes with the same setting differ by up to {num(spread)}× in their measured median, while the "
            f"warm-up setting moves the median across processes by {num(moved)}×"
            + (": the host's speed in each process, not the warm-up, sets the number." if spread > moved else ".")
        )
        point = e2e[
            (e2e["size"] == size)
            & (e2e["mode"] == mode)
            & (e2e["attention"] == "naive")
            & (e2e["precision"] == "fp32")
            & (e2e["compile"] == "eager")
            & (e2e["context_length"] == settings["context_length"].iloc[0])
        ]
        if len(point) and "host_bound" in point and point["host_bound"].notna().all():  # graphed (not on a CPU)
            p = point.iloc[0]
            line += (
                f" The e2e study times this point at {num(p['graphed_median_ms'])} ms graphed against "
                f"{num(p['median_ms'])} ms launched: {'host-bound' if p['host_bound'] else 'not host-bound'}."
            )
        lines.append(line)
    return lines


def learning_rates(e2e: pd.DataFrame) -> str:
    """The train step's AdamW rate by size, in words: each step trains on the point's one batch again,
    and the rate is the one at which that stays finite (``lmperf.model.repeated_batch_lr``); "" for
    rows that do not record it."""
    if "lr" not in e2e or e2e["lr"].isna().all():
        return ""
    rates = sort_by_size(e2e.dropna(subset=["lr"]).drop_duplicates("size"), ["size"])
    listed = ", ".join(f"{lr:.3g} at {size}" for size, lr in zip(rates["size"], rates["lr"]))
    return f" at learning rate {listed} (chosen so that train steps repeated on one batch keep the weights finite)"


def naive_alone(e2e: pd.DataFrame) -> str:
    """The precisions whose targets timed naive attention alone while another compared attentions
    (the grid's ``e2e.attention_precisions``), in words; "" where every precision timed the same."""
    timed = e2e.groupby("precision")["attention"].agg(set)
    alone = [p for p in grid.PRECISIONS if p in timed and timed[p] == {"naive"}]
    if not alone or len(alone) == len(timed):
        return ""
    verb, it = ("times", "it") if len(alone) == 1 else ("time", "them")
    return (
        f" {' and '.join(alone)} {verb} naive attention alone (the grid's `e2e.attention_precisions`), so no "
        f"attention is compared in {it}."
    )


def eager_alone(e2e: pd.DataFrame) -> str:
    """The precisions that ran eager alone while another ran compiled too (the grid's
    ``e2e.compile_precisions``), in words; "" where every precision ran the same modes."""
    ran = e2e.groupby("precision")["compile"].agg(set)
    alone = [p for p in grid.PRECISIONS if p in ran and ran[p] == {"eager"}]
    compiled = [p for p in grid.PRECISIONS if p in ran and p not in alone]
    if not alone or not compiled:
        return ""
    return (
        f" {' and '.join(alone)} ran eager alone in this run (the grid's `e2e.compile_precisions`, which the full "
        "grid narrows to save time; `wide.yaml` compiles every precision), so torch.compile's speed-up is measured "
        f"in {' and '.join(compiled)} alone."
    )


def replay_turns(e2e: pd.DataFrame) -> str:
    """How the attention variants of a point were timed, from the rows with ``graphed_turns``: launched
    interleaved step by step, replayed in turns of held blocks."""
    rows = gpu_bound(e2e)
    rows = rows[rows["graphed_turns"].notna()] if "graphed_turns" in rows else rows.iloc[:0]
    if rows.empty:  # rows made before the replays took turns say nothing of it, as their report did not
        return ""
    turns, settle = int(rows["graphed_turns"].max()), setting(rows, "settle_seconds")
    sooner = sooner_clause(rows)
    held = (
        f"held first until its time per step stops moving (at most {num(settle, 1)} s){sooner}, then " if settle else ""
    )
    return (
        "Where a point times several attention variants, their launched steps are interleaved step by step, A B A B; "
        f"their replays take {plural(turns, 'turn')} in blocks, each {held}timed while the SM clock and "
        "power are sampled, so that near the power limit each variant runs at the clock its own work keeps. "
    )


def _attention_section(e2e: pd.DataFrame) -> list[str]:
    """Attention variants in the model, timed in one process; ratios on graphed replays."""
    ratios = attention_ratios(e2e)
    if ratios.empty:
        return []
    turned = "graphed_turns" in e2e and e2e["graphed_turns"].notna().any()  # replays in turns: CIs unpaired
    timed = "in turns" if turned else "interleaved"
    out = [f"### Attention in the model (train step, graphed, timed {timed} in one process)", ""]
    parts = []
    for (other, precision, compile_), g in ratios.groupby(["attention", "precision", "compile"]):
        wins, losses = int((g["resolved"] & (g["speedup"] > 1)).sum()), int((g["resolved"] & (g["speedup"] < 1)).sum())
        parts.append(
            f"{other} {precision} {compile_}: median {num(g['speedup'].median())}× "
            f"({wins} faster, {losses} slower, {len(g) - wins - losses} not resolved of {len(g)})"
        )
    out += [
        "Speed-up over naive attention (naive time / other time; a point counts as faster or slower only where its "
        f"{'' if turned else 'paired '}bootstrap 95% CI excludes 1, else *not resolved*): " + "; ".join(parts) + ".",
        "",
    ]
    flash = ok(e2e[(e2e["attention"] == "flash_triton") & (e2e["mode"] == "train_step")])
    flash = sort_by_size(flash, ["size", "precision"])
    out += paragraphs(kernels_sentence(flash, "flash_triton", lambda r: f"{r['size']} {r['precision']}"))
    ratios = sort_by_size(ratios, ["size", "context_length", "precision", "compile"])
    frame = pd.DataFrame(
        {
            "size": ratios["size"],
            "context": ratios["context_length"],
            "precision": ratios["precision"],
            "compile": ratios["compile"],
            "attention": ratios["attention"],
            "naive (ms)": ratios["base_ms"].map(num),
            "other (ms)": ratios["other_ms"].map(num),
            "speed-up (95% CI)": [
                f"{ratio(r.speedup)} ({num(r.ci95_low, 3)}–{num(r.ci95_high, 3)})" for r in ratios.itertuples()
            ],
            "resolved": ratios["resolved"].map({True: "yes", False: "not resolved"}),
        }
    )
    return out + [table(frame), ""]


def _launched_attention(e2e: pd.DataFrame) -> list[str]:
    """Our attention against SDPA in the model, launched, as a user times a model: per size,
    precision, compile and mode, how many points (contexts) the paired ratio of their interleaved
    steps resolves either way, and the speed-ups' median and range."""
    ratios = launched_against(e2e)
    if ratios.empty:
        return []
    ratios = ratios.assign(
        faster=ratios["resolved"] & (ratios["speedup"] > 1), slower=ratios["resolved"] & (ratios["speedup"] < 1)
    )
    keys = ["size", "precision", "compile", "mode"]
    groups = sort_by_size(
        ratios.groupby(keys, as_index=False).agg(
            points=("speedup", "size"),
            faster=("faster", "sum"),
            slower=("slower", "sum"),
            median=("speedup", "median"),
            low=("speedup", "min"),
            high=("speedup", "max"),
        ),
        keys,
    )
    frame = pd.DataFrame(
        {
            "size": groups["size"],
            "precision": groups["precision"],
            "compile": groups["compile"],
            "mode": groups["mode"].map(MODE_LABELS),
            "contexts": groups["points"],
            "ours faster": groups["faster"],
            "ours slower": groups["slower"],
            "not resolved": groups["points"] - groups["faster"] - groups["slower"],
            "speed-up: median (range)": [
                f"{ratio(g.median)} ({num(g.low, 3)}–{num(g.high, 3)})" for g in groups.itertuples()
            ],
        }
    )
    faster, slower = int(ratios["faster"].sum()), int(ratios["slower"].sum())
    return [
        "### Our attention against SDPA in the model, launched",
        "",
        "Users time models launched, host time and all. Speed-up of our FlashAttention (`flash_triton`) over "
        "SDPA, launched (SDPA time / ours); a point counts as faster or slower only where the paired bootstrap "
        f"95% CI of their interleaved steps excludes 1: ours faster at {faster}, slower at {slower}, not resolved "
        f"at {len(ratios) - faster - slower} of {plural(len(ratios), 'point')}. Host-bound points "
        f"({int(ratios['host_bound'].sum())} of {len(ratios)}) measure the two launch paths as much as the kernels.",
        "",
        table(frame),
        "",
    ]


def _timer_sentence(e2e: pd.DataFrame) -> str:
    gap = timer_agreement(e2e)
    if gap.empty:
        return "" if gpu_bound(e2e).empty else "No row has CUDA-event times, so the host timer is not cross-checked."
    return (
        f"Timer check (of the clock, not of the GPU: both clocks include the same launch gaps): the host timer "
        f"agrees with CUDA events around the same launched steps within {pct(gap.max(), 2)} on every row "
        f"(median {pct(gap.median(), 2)}, {len(gap)} rows)."
    )


def warmup_intro(warmup: pd.DataFrame) -> str:
    """What zero warm-up steps include, on the device the warm-up rows ran on."""
    commits = ", ".join(f"`{c}`" for c in sorted(warmup["commit"].dropna().astype(str).unique())) or "—"
    on_gpu = "device_type" not in warmup or (warmup["device_type"] == "cuda").any()
    first = (
        "CUDA context creation, kernel loading, cuBLAS handle and workspace set-up and the caching allocator's first "
        "device allocations"
        if on_gpu
        else "each op's first call (lazy initialization, the allocator's first requests, and compilation where the "
        "model is compiled)"
    )
    windowed = "warmup_windows" in warmup and warmup["warmup_windows"].notna().all()
    how = (
        "Several fresh processes each time every step from their first. A warm-up setting's row counts that "
        "many of a process's first steps as warm-up and the measured steps after them as its timed steps, so "
        "every setting's rows come from the same processes. Zero"
        if windowed
        else "Each setting runs in several fresh processes, so zero"  # as rows made one process a setting read
    )
    return (
        f"{how} warm-up steps means the measured steps include {first}; the spread across processes shows how "
        f"far one process's host speed moves the number. Warm-up rows: commit {commits}."
    )


def paragraphs(*sentences: str) -> list[str]:
    """The non-empty sentences, each a paragraph of its own."""
    return [line for sentence in sentences if sentence for line in (sentence, "")]


def figure_or_reason(title: str, path: str, drawn: bool, reason: str) -> list[str]:
    """A figure's embed, or where its data is missing a line saying which figure and why (the PNG
    itself then says so too)."""
    return [f"![{title}]({path})" if drawn else f"*{title}: not drawn, {reason}.*", ""]


def _step_tables(e2e: pd.DataFrame) -> list[str]:
    out = ["### Step times", ""]
    for precision, compile_, _ in _regimes(e2e):
        frame = step_time_table(e2e, precision, compile_)
        if not frame.empty:
            out += [f"**{precision}, {compile_}**", "", table(frame), ""]
    return out


def _graphed_parts(e2e_all: pd.DataFrame, e2e: pd.DataFrame) -> list[str]:
    """The comparisons built on graphed times: physics, host overhead, repeatability, the backward
    ratio; or where no step was graphed, which figures that leaves out."""
    if gpu_bound(e2e_all).empty:
        return [
            "*Not drawn: launched vs graphed step time, graphed step time vs model size, forward+backward over "
            "forward and the bf16 speed-up, since no step was replayed as a CUDA graph in this run (that needs a "
            "CUDA device).*",
            "",
        ]
    return [
        *paragraphs(_physics_sentence(e2e_all), _host_sentence(e2e), _ci_sentence(e2e_all)),
        *figure_or_reason("Launched vs graphed step time", "figures/e2e_host_overhead.png", True, ""),
        *figure_or_reason("Graphed step time vs model size", "figures/e2e_time_vs_size.png", True, ""),
        "### The backward pass",
        "",
        _ratio_sentence(e2e),
        "",
        *figure_or_reason(
            "Forward+backward over forward",
            "figures/e2e_backward_ratio.png",
            not backward_ratio(e2e).empty,
            "no grid point has both a graphed forward and a graphed forward+backward time",
        ),
        *_speedups(e2e),
    ]


def _speedups(e2e: pd.DataFrame) -> list[str]:
    fp32, bf16 = grid.PRECISIONS  # the baseline first
    eager, compiled = grid.COMPILE_MODES
    paragraph, gains = _speedup_paragraph(e2e, "precision", fp32, bf16, "the bf16 speed-up", per="compile")
    out = ["### bf16 autocast speed-up (graphed fp32 time / graphed bf16 time)", "", paragraph, ""]
    if not gains.empty:
        out += [table(_speedup_table(gains, "compile")), "", "![bf16 speed-up](figures/e2e_bf16_speedup.png)", ""]
    paragraph, gains = _speedup_paragraph(
        e2e, "compile", eager, compiled, "the torch.compile speed-up", per="precision"
    )
    out += ["### torch.compile speed-up (graphed eager time / graphed compiled time)", "", paragraph, ""]
    return out + ([table(_speedup_table(gains, "precision")), ""] if not gains.empty else [])


def _mfu_and_optimizer(e2e: pd.DataFrame) -> list[str]:
    out = []
    mfu = mfu_table(e2e)
    if not mfu.empty:
        out += ["### Model FLOPs utilization (compiled)", "", _mfu_sentence(e2e), "", table(mfu), ""]
    opt = optimizer_table(e2e)
    if not opt.empty:
        out += [
            "### The optimizer step",
            "",
            "GPU time of the optimizer step (graphed train step − graphed forward+backward, median over contexts), "
            "and its bandwidth counted at AdamW's least traffic: read p, g, m, v and write p, m, v, 28 bytes per "
            "fp32 parameter. The bound is that traffic at the device's HBM bandwidth.",
            "",
            table(opt),
            "",
        ]
    return out


def _warmup_part(warmup: pd.DataFrame, e2e: pd.DataFrame) -> list[str]:
    return [
        "### Warm-up",
        "",
        warmup_intro(warmup),
        "",
        table(warmup_table(warmup)),
        "",
        *paragraphs("\n".join(_warmup_bullets(warmup, e2e))),
        "![Warm-up across processes](figures/warmup_cv.png)",
        "",
    ]


def _not_run(e2e_all: pd.DataFrame) -> list[str]:
    failed = e2e_all[e2e_all["status"] != "ok"]
    if failed.empty:
        return []
    return [
        "### Points that did not run",
        "",
        *(
            f"- {r.attention}, {r.size}, ctx {r.context_length}, {r.precision}, {r.compile}, "
            f"{MODE_LABELS[r.mode]}: "
            f"**{r.status}** — {str(r.note).split(' GPU ')[0]}"
            for r in failed.itertuples()
        ),
        "",
    ]


def render(e2e_all: pd.DataFrame, warmup: pd.DataFrame) -> str:
    """Everything but the attention subsection uses the naive-attention rows, the handout's model."""
    e2e = handout_model(e2e_all)
    out = ["## End-to-end benchmarking", "", _method(e2e_all), "", *_step_tables(e2e)]
    out += _graphed_parts(e2e_all, e2e) + _mfu_and_optimizer(e2e) + _warmup_part(warmup, e2e)
    out += _attention_section(e2e_all) + _launched_attention(e2e_all)
    timer = _timer_sentence(e2e)
    out += [timer, ""] if timer else []
    return "\n".join(out + _not_run(e2e_all))
