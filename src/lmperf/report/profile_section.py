"""The report's "Profiling" section: the handout's nsys_profile questions (a)-(e), computed from the
kernel tables (results/profile.csv) and timings (results/profile_timing.csv)."""

import re

import pandas as pd

from lmperf.model import model_config
from lmperf.report.markdown import change, drop_empty, num, ok, pct, plural, share, span, table
from lmperf.report.style import sort_by_size

# Softmax per score element: max, subtract, exp, sum, divide.
SOFTMAX_FLOPS_PER_SCORE = 5
NON_GEMM_SHOWN = 0.01  # answer (c) lists the non-GEMM kernels of at least this share of forward time


def short_name(kernel: str, width: int = 64) -> str:
    """A kernel's name for a table: PyTorch's templated kernels by their function and the op they
    apply (``elementwise_kernel [MulFunctor]``, ``reduce_kernel [MeanOps]``), a CUTLASS wrapper by the
    kernel it wraps, anything else as named; cut to ``width`` characters."""
    name = kernel.removeprefix("void ").replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    if "<" in name or "(" in name:
        head, rest = re.split(r"(?=[<(])", name, maxsplit=1)
        base = head.split("::")[-1]
        ops = re.findall(r"\b(\w*(?:Functor|Ops)\w*|\w+_kernel(?:_cuda)?)\b", rest)
        wrapped = re.match(r"<\s*(\w+)", rest)
        if ops:
            name = f"{base} [{ops[-1]}]" if "Functor" in ops[-1] or "Ops" in ops[-1] else f"{base} [{ops[0]}]"
        elif base.startswith("Kernel") and wrapped:
            name = wrapped.group(1)
        else:
            name = base
    return name if len(name) <= width else name[: width - 1] + "…"


def attention_flop_ratio(size: str, ctx: int) -> float:
    """Softmax FLOPs over the two attention matmuls' FLOPs (QK^T and PV: 2 x 2·T·T·d_head per head)."""
    d_head = model_config(size, ctx).d_head
    return SOFTMAX_FLOPS_PER_SCORE / (2 * 2 * d_head)


def e2e_point(e2e: pd.DataFrame, size: str, ctx: int, mode: str) -> pd.Series | None:
    """The e2e study's row of the profiled configuration (naive attention, fp32, eager), if it ran."""
    if e2e is None or e2e.empty:
        return None
    rows = ok(
        e2e[
            (e2e["attention"] == "naive")
            & (e2e["precision"] == "fp32")
            & (e2e["compile"] == "eager")
            & (e2e["size"] == size)
            & (e2e["context_length"] == ctx)
            & (e2e["mode"] == mode)
        ]
    )
    return rows.iloc[0] if len(rows) else None


def answers(kernels: pd.DataFrame, timing: pd.DataFrame, e2e: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (size, context): the numbers behind answers (a)-(e), the profiler's forward time
    against the e2e study's unprofiled and graphed medians of the same point (independent runs), and
    the GPU's busy fraction per mode (kernel time over the profiled step's wall time). Rows that did
    not run (out of memory, skipped) answer nothing."""
    kernels, timing = ok(kernels), ok(timing)
    out = []
    for (size, ctx), group in kernels.groupby(["size", "context_length"]):
        fwd = group[group["mode"] == "forward"]
        train = group[group["mode"] == "train_step"]
        t = timing[(timing["size"] == size) & (timing["context_length"] == ctx)].set_index("mode")
        row = {"size": size, "context_length": ctx, **_timing_answers(t, fwd, train, e2e, size, ctx)}
        if len(fwd):
            row.update(_forward_answers(fwd, size, ctx))
        if len(train):
            row.update(_train_answers(train, fwd))
        out.append(row)
    return pd.DataFrame(out)


def _timing_answers(t: pd.DataFrame, fwd, train, e2e: pd.DataFrame | None, size: str, ctx: int) -> dict:
    """(a): the profiler's forward time against the e2e study's; the busy fractions; the overhead."""
    row = {}
    if "forward" in t.index:
        f = t.loc["forward"]
        row.update(plain_forward_ms=f["step_ms"], profiler_forward_ms=f["profiler_forward_ms"])
        point = e2e_point(e2e, size, ctx, "forward")
        if point is not None:
            row.update(
                e2e_forward_ms=point["median_ms"],
                e2e_graphed_forward_ms=point.get("graphed_median_ms"),
                agreement=f["profiler_forward_ms"] / point["median_ms"] - 1,
            )
    for mode, mode_kernels in (("forward", fwd), ("train_step", train)):
        if mode in t.index and len(mode_kernels):
            busy = mode_kernels["total_ms"].sum() / t.loc[mode, "measured_steps"] / t.loc[mode, "profiled_step_ms"]
            row[f"busy_{mode}"] = busy
    if len(t):
        row["overhead"] = (t["profiled_step_ms"] / t["step_ms"] - 1).max()
    return row


def _forward_answers(fwd: pd.DataFrame, size: str, ctx: int) -> dict:
    """(b), (c), (d), (e) of the forward pass: its top kernel, the non-GEMM work, the GEMM share,
    softmax against the attention matmuls."""
    by_kernel = fwd.groupby("kernel").agg(total=("total_ms", "sum"), per_step=("instances_per_step", "sum"))
    top = by_kernel["total"].idxmax()
    total = fwd["total_ms"].sum()
    non_gemm = fwd[fwd["category"] != "gemm"].groupby("kernel")["total_ms"].sum() / total
    row = {
        "top_forward": top,
        "top_forward_calls": by_kernel.loc[top, "per_step"],
        "non_gemm": ", ".join(
            f"{short_name(k)} ({pct(v)})"
            for k, v in non_gemm[non_gemm >= NON_GEMM_SHOWN].sort_values(ascending=False).head(4).items()
        ),
        "gemm_share_forward": fwd.loc[fwd["category"] == "gemm", "total_ms"].sum() / total,
    }
    attention = fwd.groupby("range")["total_ms"].sum()
    matmuls = attention.get("forward/attention scores", 0) + attention.get("forward/final matmul", 0)
    if matmuls > 0 and "forward/softmax" in attention:
        row.update(
            softmax_time_ratio=attention["forward/softmax"] / matmuls,
            softmax_flop_ratio=attention_flop_ratio(size, ctx),
        )
    return row


def _train_answers(train: pd.DataFrame, fwd: pd.DataFrame) -> dict:
    """(b), (d) of the train step: its top kernel, the GEMM share, the category that grows most."""
    total = train["total_ms"].sum()
    share = train.groupby("category")["total_ms"].sum() / total
    row = {"top_train": train.groupby("kernel")["total_ms"].sum().idxmax(), "gemm_share_train": share.get("gemm", 0.0)}
    if len(fwd):
        fshare = fwd.groupby("category")["total_ms"].sum() / fwd["total_ms"].sum()
        growth = share.sub(fshare, fill_value=0).drop("gemm", errors="ignore")
        row["grows_instead"] = f"{growth.idxmax()} (+{num(growth.max() * 100, 1)} pts)" if len(growth) else ""
    return row


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A column of the answers, or NaN on every row where no point had that answer."""
    return rows[name] if name in rows else pd.Series(float("nan"), index=rows.index)


def _kernel_cell(kernel) -> str:
    return short_name(kernel) if isinstance(kernel, str) else "—"


def _method(kernels: pd.DataFrame, timing: pd.DataFrame, e2e: pd.DataFrame | None) -> list[str]:
    first = timing.iloc[0]
    on_gpu = first["device_type"] == "cuda"
    unit = "kernels" if on_gpu else "operators (self CPU time: no GPU here)"
    busy = (
        "The GPU's busy fraction is the kernel time of a step over its wall time under the profiler. " if on_gpu else ""
    )
    graphed = (
        ", launched and graphed"
        if e2e is not None and "graphed_median_ms" in e2e and e2e["graphed_median_ms"].notna().any()
        else ""
    )
    return [
        f"Made with **{', '.join(sorted(kernels['profiler'].unique()))}** on {first['device_name']}: fp32, batch "
        f"{int(first['batch_size'])}, {int(first['measured_steps'])} measured steps after warm-up, naive attention "
        f"annotated with ranges; the tables count {unit} of the measured steps only, warm-up excluded. "
        "(a) compares the profiler's forward time, the "
        f"{', '.join(sorted(timing['profiler_forward_basis'].unique()))}, "
        "with the e2e study's median of the same point (naive, fp32, eager), measured in another process with no "
        f"profiler attached{graphed}: an independent measurement, so the check can fail. {busy}The profiler's "
        "overhead is the profiled step against the same step timed with no profiler attached (nsys: in the parent "
        "process, after the profiled child; torch.profiler: in the same process), the larger of forward and train "
        "step.",
        "",
    ]


def _tables(rows: pd.DataFrame, on_gpu: bool, kernel: str) -> list[str]:
    timings = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "profiler forward (ms)": _column(rows, "profiler_forward_ms").map(num),
            "e2e launched (ms)": _column(rows, "e2e_forward_ms").map(num),
            "e2e graphed (ms)": _column(rows, "e2e_graphed_forward_ms").map(num),
            "profiler vs e2e": _column(rows, "agreement").map(pct),
            "GPU busy, forward": _column(rows, "busy_forward").map(pct),
            "GPU busy, train step": _column(rows, "busy_train_step").map(pct),
            "profiler overhead": _column(rows, "overhead").map(pct),
        }
    )
    if not on_gpu:  # operators' self time over the step's wall time says nothing of a GPU
        timings = timings.drop(columns=["GPU busy, forward", "GPU busy, train step"])
    tops = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            f"top forward {kernel}": _column(rows, "top_forward").map(_kernel_cell),
            "calls / forward": _column(rows, "top_forward_calls").map(lambda x: num(x, 0)),
            f"top train-step {kernel}": _column(rows, "top_train").map(_kernel_cell),
        }
    )
    shares = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "GEMM share, forward": _column(rows, "gemm_share_forward").map(pct),
            "GEMM share, train step": _column(rows, "gemm_share_train").map(pct),
            "grows instead": _column(rows, "grows_instead").fillna("—"),
        }
    )
    return [
        "(a) The profiler's forward time against the e2e study's, and what the profiler costs:",
        "",
        table(drop_empty(timings, keep=["e2e launched (ms)", "profiler vs e2e"])),
        "",
        f"(b) The top forward {kernel} and its calls per forward pass, and the train step's top {kernel}:",
        "",
        table(tops),
        "",
        f"(d) The GEMM share of {kernel} time, and the category whose share grows most from forward to train step:",
        "",
        table(shares),
        "",
    ]


def _agreement_lines(rows: pd.DataFrame, on_gpu: bool) -> list[str]:
    if not ("agreement" in rows and rows["agreement"].notna().any()):
        if "plain_forward_ms" in rows:
            return [
                "(a) No e2e row of the profiled configuration (naive, fp32, eager) to check the profiler against.",
                "",
            ]
        return []
    checked = rows.dropna(subset=["agreement"])
    worst = checked.loc[checked["agreement"].abs().idxmax()]
    span_graphed = (checked["profiler_forward_ms"] / checked["e2e_graphed_forward_ms"]).dropna()
    graphed_part = (
        f", and is {span(span_graphed.min(), span_graphed.max())}× its graphed median" if len(span_graphed) else ""
    )
    return [
        f"(a) The profiler's forward time differs from the e2e study's unprofiled launched median by up to "
        f"{pct(checked['agreement'].abs().max())} at {plural(len(checked), 'point')} (worst: {worst['size']}, "
        f"context {worst['context_length']}, "
        f"{'longer' if worst['agreement'] >= 0 else 'shorter'} under the profiler){graphed_part}."
        + (
            " The forward range's span includes every gap in which the GPU waits for the host (and for the "
            "profiler's own per-launch work); the busy fractions below say how much of it is kernel time."
            if on_gpu
            else " On a CPU the profiler records each operator on the host that runs it, so its own work is "
            "part of the profiled time: the tables below say which operators run, not how fast without it."
        ),
        "",
    ]


def _busy_and_overhead(rows: pd.DataFrame, on_gpu: bool, failed: pd.DataFrame) -> list[str]:
    out = []
    for mode in ("forward", "train_step") if on_gpu else ():
        if f"busy_{mode}" in rows and rows[f"busy_{mode}"].notna().any():
            busy = rows[f"busy_{mode}"].dropna()
            out += [
                f"GPU busy, {mode.replace('_', ' ')}: {span(busy.min(), busy.max(), pct)} of the profiled step's "
                "wall time is kernel time; the rest the GPU waits for the host.",
                "",
            ]
    if "overhead" in rows and rows["overhead"].notna().any():
        low, high = rows["overhead"].min(), rows["overhead"].max()
        sentence = change(
            low,
            high,
            "The profiler slows the step by",
            "The step ran faster under the profiler than without it, by",
            "The profiler changes the step time by",
        )
        out += [sentence + ".", ""]
    if len(failed):
        out += [
            "Did not fit (no kernel table, a — above): "
            + "; ".join(f"{r.size} {r.mode} at context {r.context_length} ({r.status})" for r in failed.itertuples())
            + ".",
            "",
        ]
    return out


def _point_lines(rows: pd.DataFrame, kernel: str) -> list[str]:
    out = []
    for r in rows.itertuples():
        parts = []
        forward, train = getattr(r, "top_forward", None), getattr(r, "top_train", None)
        if isinstance(forward, str):
            lead = f"(b) `{short_name(forward)}` leads the forward pass"
            if isinstance(train, str):  # a point whose train step was not profiled says nothing of it
                lead += "; the train step is led by " + (
                    f"the same {kernel}" if forward == train else f"`{short_name(train)}`"
                )
            parts.append(lead)
        elif isinstance(train, str):
            parts.append(f"(b) `{short_name(train)}` leads the train step; the forward pass is not profiled")
        if isinstance(getattr(r, "non_gemm", None), str) and r.non_gemm:
            parts.append(f"(c) non-GEMM work of ≥ {share(NON_GEMM_SHOWN)} of forward time: {r.non_gemm}")
        if pd.notna(getattr(r, "softmax_time_ratio", float("nan"))):
            parts.append(
                f"(e) softmax takes {num(r.softmax_time_ratio)}× the time of the two attention matmuls for "
                f"{num(r.softmax_flop_ratio, 3)}× their FLOPs"
            )
        if parts:
            out.append(f"- {r.size}, context {r.context_length}: " + "; ".join(parts) + ".")
    return out


def render(kernels: pd.DataFrame, timing: pd.DataFrame, e2e: pd.DataFrame | None = None) -> str:
    out = ["## Profiling", ""]
    failed = timing[timing["status"] != "ok"] if "status" in timing else timing.iloc[:0]
    kernels, timing = ok(kernels), ok(timing)
    if kernels.empty:
        return "\n".join(out + ["No profile was recorded.", ""])
    on_gpu = timing.iloc[0]["device_type"] == "cuda"
    kernel = "kernel" if on_gpu else "operator"
    rows = sort_by_size(answers(kernels, timing, e2e), ["size", "context_length"])
    out += _method(kernels, timing, e2e) + _tables(rows, on_gpu, kernel) + _agreement_lines(rows, on_gpu)
    out += _busy_and_overhead(rows, on_gpu, failed) + _point_lines(rows, kernel)
    return "\n".join(out + [""])
