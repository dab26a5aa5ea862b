"""The report's "End-to-end benchmarking" section: the handout's benchmarking_script answers from data."""

import pandas as pd

from lmperf.report.e2e_analysis import backward_ratio, describe_trend, handout_model, speedup, timer_agreement, trend_with_size
from lmperf.report.markdown import num, ok, pct, ratio, table, text
from lmperf.report.style import MODE_LABELS, sort_by_size

MODES = list(MODE_LABELS)


def _cell(row: pd.Series) -> str:
    if row["status"] != "ok":
        return row["status"].upper()
    return f"{num(row['mean_ms'])} ± {num(row['std_ms'])}"


def step_time_table(e2e: pd.DataFrame, precision: str, compile_: str, attention: str = "naive") -> pd.DataFrame:
    """size x context rows, 'mean ± std' ms per mode (or OOM), and the largest CV of the point."""
    rows = e2e[(e2e["precision"] == precision) & (e2e["compile"] == compile_) & (e2e["attention"] == attention)]
    out = []
    for (size, ctx), point in rows.groupby(["size", "context_length"], sort=False):
        by_mode = point.set_index("mode")
        record = {"size": size, "context": ctx}
        for mode in MODES:
            record[f"{MODE_LABELS[mode]} (ms)"] = _cell(by_mode.loc[mode]) if mode in by_mode.index else "—"
        record["max CV"] = pct(ok(point)["cv"].max()) if len(ok(point)) else "—"
        out.append(record)
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    return sort_by_size(frame, ["size", "context"])


def warmup_table(warmup: pd.DataFrame) -> pd.DataFrame:
    rows = sort_by_size(ok(warmup), ["size", "mode", "warmup_steps"])
    return pd.DataFrame({
        "size": rows["size"], "mode": rows["mode"].map(MODE_LABELS), "warm-up steps": rows["warmup_steps"],
        "mean (ms)": rows["mean_ms"].map(num), "std (ms)": rows["std_ms"].map(num), "CV": rows["cv"].map(pct),
        "first call (ms)": rows["first_step_ms"].map(num),
    })


def _ratio_sentence(e2e: pd.DataFrame) -> str:
    ratios = backward_ratio(e2e)
    if ratios.empty:
        return "No grid point has both a forward and a forward+backward timing."
    r = ratios["ratio"]
    return (
        f"Forward + backward takes **{num(r.median())}×** the forward time (median over {len(r)} grid points; "
        f"range {num(r.min())}–{num(r.max())}), so the backward pass costs about {num(r.median() - 1)}× a forward pass. "
        f"The FLOP count predicts 3× (backward = 2× forward); the forward here is inference (`torch.no_grad`), "
        f"which stores no activations for backward."
    )


def _cv_sentence(e2e: pd.DataFrame) -> str:
    rows = ok(e2e)
    if rows.empty:
        return "No step ran to completion."
    worst = rows.loc[rows["cv"].idxmax()]
    under = (rows["cv"] < 0.02).mean()
    verdict = "low" if under >= 0.9 else "not uniformly low"
    sentence = (
        f"Variation is {verdict}: with {int(worst['warmup_steps'])} warm-up steps, {pct(under)} of the {len(rows)} timed rows "
        f"have a coefficient of variation under 2%; the largest is {pct(worst['cv'], 2)} "
        f"({worst['size']}, ctx {worst['context_length']}, {worst['precision']}, {worst['compile']}, {MODE_LABELS[worst['mode']]})."
    )
    noisy, steady = rows[rows["cv"] >= 0.02], rows[rows["cv"] < 0.02]
    if len(noisy) and len(steady):
        sentence += (
            f" The noisy rows are the short steps: median step {num(noisy['median_ms'].median())} ms against "
            f"{num(steady['median_ms'].median())} ms for rows under 2%. Where the host launches kernels slower than "
            "the GPU finishes them, host-side jitter lands in the step time."
        )
    return sentence


def _timer_sentence(e2e: pd.DataFrame) -> str:
    gap = timer_agreement(e2e)
    if gap.empty:
        return "CUDA-event timing is not available on this device, so the host timer is not cross-checked."
    return (
        f"The host timer (`timeit.default_timer` around a synchronized step) agrees with CUDA events bracketing "
        f"the same steps within {pct(gap.max(), 2)} on every row (median {pct(gap.median(), 2)}, {len(gap)} rows)."
    )


def _warmup_bullets(warmup: pd.DataFrame) -> list[str]:
    rows = ok(warmup)
    lines = []
    for (size, mode), group in rows.groupby(["size", "mode"]):
        group = group.set_index("warmup_steps").sort_index()
        cold, warm = group.iloc[0], group.iloc[-1]
        lines.append(
            f"- {size}, {MODE_LABELS[mode]}: CV {pct(cold['cv'])} with {group.index[0]} warm-up steps against "
            f"{pct(warm['cv'])} with {group.index[-1]}; the mean moves from {num(cold['mean_ms'])} to {num(warm['mean_ms'])} ms. "
            f"The process's first call took {num(cold['first_step_ms'])} ms, "
            f"{num(cold['first_step_ms'] / warm['median_ms'], 1)}× a steady step."
        )
    return lines


def _speedup_paragraph(e2e: pd.DataFrame, column: str, slow: str, fast: str, what: str) -> tuple[str, pd.DataFrame]:
    gains = speedup(e2e, column, slow, fast)
    if gains.empty:
        return f"No pair of {slow} and {fast} rows to compare.", gains
    per_size = gains.groupby(["size", "params", "mode"], as_index=False)["speedup"].median()
    sentences = []
    for mode in MODES:
        series = per_size[per_size["mode"] == mode].sort_values("params")
        if series.empty:
            continue
        rho = trend_with_size(series, "speedup")
        sentences.append(
            f"{MODE_LABELS[mode]}: {what} is {num(series['speedup'].iloc[0])}× at {series['size'].iloc[0]} and "
            f"{num(series['speedup'].iloc[-1])}× at {series['size'].iloc[-1]} (median over contexts), and "
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
    """MFU of the train step per size and context, for the fastest configuration (bf16, compiled)."""
    rows = e2e[(e2e["mode"] == "train_step") & (e2e["precision"] == "bf16") & (e2e["compile"] == "compiled")]
    rows = sort_by_size(rows, ["size", "context_length"])
    return pd.DataFrame({
        "size": rows["size"], "context": rows["context_length"],
        "step (ms)": [num(r.mean_ms) if r.status == "ok" else r.status.upper() for r in rows.itertuples()],
        "model TFLOP/step": rows["model_tflop_per_step"].map(lambda x: num(x, 3)),
        "achieved TFLOP/s": rows["achieved_tflops"].map(lambda x: num(x, 1)),
        "MFU": rows["mfu"].map(pct),
    })


def attention_table(e2e: pd.DataFrame, other: str) -> pd.DataFrame:
    """Train step with naive attention vs ``other``: times (or OOM), speed-up and MFU per point."""
    keys = ["size", "context_length", "precision", "compile"]
    steps = e2e[e2e["mode"] == "train_step"]
    naive = handout_model(steps).set_index(keys)
    theirs = steps[steps["attention"] == other].set_index(keys)
    both = naive.join(theirs, lsuffix="_naive", rsuffix="_other", how="inner").reset_index()
    both = sort_by_size(both, keys)

    def cell(status, ms):
        return num(ms) if status == "ok" else status.upper()

    return pd.DataFrame({
        "size": both["size"], "context": both["context_length"], "precision": both["precision"], "compile": both["compile"],
        "naive (ms)": [cell(s, m) for s, m in zip(both["status_naive"], both["mean_ms_naive"])],
        f"{other} (ms)": [cell(s, m) for s, m in zip(both["status_other"], both["mean_ms_other"])],
        "speed-up": (both["mean_ms_naive"] / both["mean_ms_other"]).map(ratio),
        "MFU naive": both["mfu_naive"].map(pct), f"MFU {other}": both["mfu_other"].map(pct),
    })


def _runs_sentence(e2e: pd.DataFrame, other: str) -> str:
    """Names the commits when naive and ``other`` share none: the two were timed in different runs,
    and a short, host-bound step carries the host's speed of its run into the ratio."""
    commits = {a: sorted(e2e.loc[e2e["attention"] == a, "commit"].dropna().astype(str).unique()) for a in ("naive", other)}
    if not commits["naive"] or not commits[other] or set(commits["naive"]) & set(commits[other]):
        return ""
    named = {a: f"commit{'s' if len(c) > 1 else ''} {', '.join(c)}" for a, c in commits.items()}
    return (f" The naive rows are from {named['naive']} and the {other} rows from {named[other]}: separate runs, "
            "so where a step is short and host-bound the ratio also carries the host's speed in each run.")


def _attention_section(e2e: pd.DataFrame) -> list[str]:
    others = [a for a in e2e["attention"].unique() if a != "naive"]
    out = []
    for other in others:
        frame = attention_table(e2e, other)
        gains = speedup(e2e[e2e["mode"] == "train_step"], "attention", "naive", other)
        rescued = ((frame["naive (ms)"] == "OOM") & (frame[f"{other} (ms)"] != "OOM")).sum()
        out += [f"### Attention in the model: naive vs {other} (train step)", ""]
        if len(gains):
            # per precision and compile mode: fp32 and bf16 run different kernels, and eager steps are host-bound
            parts = [f"{precision} {mode} {num(g['speedup'].median())}× ({len(g)} point{'s' if len(g) != 1 else ''}, "
                     f"{num(g['speedup'].min())}–{num(g['speedup'].max())})"
                     for (precision, mode), g in gains.groupby(["precision", "compile"])]
            out += [f"Train step with {other} over naive attention, median speed-up: {'; '.join(parts)}. "
                    f"{rescued} point{'s' if rescued != 1 else ''} that run{'s' if rescued == 1 else ''} out of memory with "
                    f"naive attention fit{'s' if rescued == 1 else ''} with {other}.{_runs_sentence(e2e, other)}", ""]
        out += [table(frame), ""]
    return out


def render(e2e_all: pd.DataFrame, warmup: pd.DataFrame) -> str:
    """Everything but the last subsection uses the naive-attention rows, the handout's model."""
    e2e = handout_model(e2e_all)
    first = e2e.iloc[0]
    out = [
        "## End-to-end benchmarking",
        "",
        f"Device **{first['device_name']}**, torch {first['torch_version']}, CUDA {text(first['cuda_version'])}, "
        f"Triton {text(first['triton_version'])}, driver {text(first['driver_version'])}, commit `{text(first['commit'])}`; "
        f"batch {first['batch_size']}, {first['warmup_steps']} warm-up + {first['measured_steps']} measured steps per point, "
        f"each step synchronized and timed with `timeit.default_timer`; optimizer `{first['optimizer']}` AdamW; "
        f"fp32 matmul precision `{first['matmul_precision']}`. *Compiled* means each Transformer block under "
        "`torch.compile` (regional compilation); *forward* is inference under `torch.no_grad()`; "
        "*train step* is forward, cross-entropy, backward and the optimizer step.",
        "",
        "### Step times (mean ± std over the measured steps)",
        "",
    ]
    for precision in ("fp32", "bf16"):
        for compile_ in ("eager", "compiled"):
            frame = step_time_table(e2e, precision, compile_)
            if not frame.empty:
                out += [f"**{precision}, {compile_}**", "", table(frame), ""]
    out += [
        _ratio_sentence(e2e), "", _cv_sentence(e2e), "", _timer_sentence(e2e), "",
        "![Step time vs model size](figures/e2e_time_vs_size.png)", "",
        "![Forward+backward over forward](figures/e2e_backward_ratio.png)", "",
        "### Warm-up",
        "",
        "Each row below is a fresh process, so zero warm-up steps means the measured steps include CUDA "
        "context creation, kernel loading, cuBLAS handle and workspace set-up and the caching allocator's "
        "first device allocations.",
        "",
        table(warmup_table(warmup)),
        "",
        *_warmup_bullets(warmup),
        "",
        "![CV vs warm-up steps](figures/warmup_cv.png)",
        "",
        "### bf16 autocast speed-up",
        "",
    ]
    paragraph, gains = _speedup_paragraph(e2e, "precision", "fp32", "bf16", "the bf16 speed-up")
    out += [paragraph, ""]
    if not gains.empty:
        out += [table(_speedup_table(gains, "compile")), "", "![bf16 speed-up](figures/e2e_bf16_speedup.png)", ""]
    paragraph, gains = _speedup_paragraph(e2e, "compile", "eager", "compiled", "the torch.compile speed-up")
    out += ["### torch.compile speed-up (eager time / compiled time)", "", paragraph, ""]
    if not gains.empty:
        out += [table(_speedup_table(gains, "precision")), ""]
    mfu = mfu_table(e2e)
    if not mfu.empty:
        best = ok(e2e[(e2e["mode"] == "train_step") & (e2e["precision"] == "bf16") & (e2e["compile"] == "compiled")])
        out += ["### Model FLOPs utilization: the baseline (bf16, compiled, train step)", ""]
        if not best.dropna(subset=["mfu"]).empty:
            top = best.loc[best["mfu"].idxmax()]
            out += [f"The best MFU is {pct(top['mfu'])} ({top['size']}, ctx {top['context_length']}) against a "
                    f"dense bf16 peak of {num(top['peak_tflops'], 1)} TFLOP/s. FLOPs per step are 6·N·tokens plus "
                    "12·L·B·T²·d for attention (see `lmperf.measure.flops`).", ""]
        out += [table(mfu), ""]
    out += _attention_section(e2e_all)
    failed = e2e_all[e2e_all["status"] != "ok"]
    if not failed.empty:
        out += ["### Points that did not run", ""]
        for r in failed.itertuples():
            out.append(f"- {r.attention}, {r.size}, ctx {r.context_length}, {r.precision}, {r.compile}, {MODE_LABELS[r.mode]}: "
                       f"**{r.status}** — {str(r.note).split(' GPU ')[0]}")
        out.append("")
    return "\n".join(out)
