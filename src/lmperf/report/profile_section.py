"""The report's "Profiling" section: the handout's nsys_profile questions (a)-(e), computed from the
kernel tables (results/profile.csv) and timings (results/profile_timing.csv)."""

import re

import pandas as pd

from lmperf.model import model_config
from lmperf.report.markdown import num, ok, pct, table
from lmperf.report.style import sort_by_size

# Softmax per score element: max, subtract, exp, sum, divide.
SOFTMAX_FLOPS_PER_SCORE = 5


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


def answers(kernels: pd.DataFrame, timing: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, context): the numbers behind answers (a)-(e)."""
    out = []
    for (size, ctx), group in kernels.groupby(["size", "context_length"]):
        fwd = group[group["mode"] == "forward"]
        train = group[group["mode"] == "train_step"]
        t = timing[(timing["size"] == size) & (timing["context_length"] == ctx)].set_index("mode")
        row = {"size": size, "context_length": ctx}
        if "forward" in t.index:
            f = t.loc["forward"]
            row.update(plain_forward_ms=f["step_ms"], harness_forward_ms=f["profiled_step_ms"],
                       profiler_forward_ms=f["profiler_forward_ms"],
                       agreement=f["profiler_forward_ms"] / f["profiled_step_ms"] - 1)
        if len(t):
            row["overhead"] = (t["profiled_step_ms"] / t["step_ms"] - 1).max()
        if len(fwd):
            by_kernel = fwd.groupby("kernel").agg(total=("total_ms", "sum"), per_step=("instances_per_step", "sum"))
            top = by_kernel["total"].idxmax()
            total = fwd["total_ms"].sum()
            non_gemm = fwd[fwd["category"] != "gemm"].groupby("kernel")["total_ms"].sum() / total
            row.update(top_forward=top, top_forward_calls=by_kernel.loc[top, "per_step"],
                       non_gemm=", ".join(f"{short_name(k)} ({pct(v)})" for k, v in non_gemm[non_gemm >= 0.01]
                                          .sort_values(ascending=False).head(4).items()),
                       gemm_share_forward=fwd.loc[fwd["category"] == "gemm", "total_ms"].sum() / total)
            attention = fwd.groupby("range")["total_ms"].sum()
            matmuls = attention.get("forward/attention scores", 0) + attention.get("forward/final matmul", 0)
            if matmuls > 0 and "forward/softmax" in attention:
                row.update(softmax_time_ratio=attention["forward/softmax"] / matmuls,
                           softmax_flop_ratio=attention_flop_ratio(size, ctx))
        if len(train):
            by_kernel = train.groupby("kernel")["total_ms"].sum()
            row["top_train"] = by_kernel.idxmax()
            total = train["total_ms"].sum()
            share = train.groupby("category")["total_ms"].sum() / total
            row["gemm_share_train"] = share.get("gemm", 0.0)
            if len(fwd):
                fshare = fwd.groupby("category")["total_ms"].sum() / fwd["total_ms"].sum()
                growth = share.sub(fshare, fill_value=0).drop("gemm", errors="ignore")
                row["grows_instead"] = f"{growth.idxmax()} (+{num(growth.max() * 100, 1)} pts)" if len(growth) else ""
        out.append(row)
    return pd.DataFrame(out)


def _kernel_cell(kernel) -> str:
    return short_name(kernel) if isinstance(kernel, str) else "—"


def render(kernels: pd.DataFrame, timing: pd.DataFrame) -> str:
    out = ["## Profiling", ""]
    failed = timing[timing["status"] != "ok"] if "status" in timing else timing.iloc[:0]
    kernels, timing = ok(kernels), ok(timing)
    if kernels.empty:
        return "\n".join(out + ["No profile was recorded.", ""])
    first = timing.iloc[0]
    unit = "kernels" if first["device_type"] == "cuda" else "operators (self CPU time: no GPU here)"
    out += [f"Made with **{', '.join(sorted(kernels['profiler'].unique()))}** on {first['device_name']}: fp32, batch "
            f"{int(first['batch_size'])}, {int(first['measured_steps'])} measured steps after warm-up, naive attention "
            f"annotated with ranges; the tables count {unit} of the measured steps only, warm-up excluded. "
            f"(a) compares the profiler's forward time, the {', '.join(sorted(timing['profiler_forward_basis'].unique()))}, "
            "with the harness's timing of the same profiled steps (synchronized wall clock). The profiler's overhead is "
            "that timing against the same step timed with no profiler attached (nsys: in the parent process, after the "
            "profiled child; torch.profiler: in the same process), the larger of forward and train step.", ""]
    rows = sort_by_size(answers(kernels, timing), ["size", "context_length"])
    out += ["(a) forward time, (b) the top forward kernel and its calls per forward pass, (d) the GEMM share:", "",
            table(pd.DataFrame({
                "size": rows["size"], "context": rows["context_length"],
                "no profiler (ms)": rows.get("plain_forward_ms", pd.Series(dtype=float)).map(num),
                "harness, profiled (ms)": rows.get("harness_forward_ms", pd.Series(dtype=float)).map(num),
                "profiler forward (ms)": rows.get("profiler_forward_ms", pd.Series(dtype=float)).map(num),
                "agreement": rows.get("agreement", pd.Series(dtype=float)).map(pct),
                "profiler overhead": rows.get("overhead", pd.Series(dtype=float)).map(pct),
                "top forward kernel": rows.get("top_forward", pd.Series(dtype=str)).map(_kernel_cell),
                "calls / forward": rows.get("top_forward_calls", pd.Series(dtype=float)).map(lambda x: num(x, 0)),
                "top train-step kernel": rows.get("top_train", pd.Series(dtype=str)).map(_kernel_cell),
                "GEMM share, forward": rows.get("gemm_share_forward", pd.Series(dtype=float)).map(pct),
                "GEMM share, train step": rows.get("gemm_share_train", pd.Series(dtype=float)).map(pct),
                "grows instead": rows.get("grows_instead", pd.Series(dtype=str)).fillna("—"),
            })), ""]
    if "agreement" in rows:
        worst = rows.dropna(subset=["agreement"]).assign(off=lambda f: f["agreement"].abs())
        worst = worst.loc[worst.groupby("context_length")["off"].idxmax()]
        out += ["(a) The profiler's forward time agrees with the harness's timing of the same steps within "
                + "; ".join(f"{pct(r.off)} at context {r.context_length} (worst: {r.size})" for r in worst.itertuples())
                + f". The profiler slows the step by {pct(rows['overhead'].min())} to {pct(rows['overhead'].max())}.", ""]
    if len(failed):
        out += ["Did not fit (no kernel table, a — above): " + "; ".join(
            f"{r.size} {r.mode} at context {r.context_length} ({r.status})" for r in failed.itertuples()) + ".", ""]
    for r in rows.itertuples():
        sentence = f"- {r.size}, context {r.context_length}: "
        parts = []
        if isinstance(getattr(r, "top_forward", None), str) and isinstance(getattr(r, "top_train", None), str):
            parts.append(f"(b) `{short_name(r.top_forward)}` leads the forward pass; the train step is led by "
                         + ("the same kernel" if r.top_forward == r.top_train else f"`{short_name(r.top_train)}`"))
        if isinstance(getattr(r, "non_gemm", None), str) and r.non_gemm:
            parts.append(f"(c) non-GEMM work of ≥ 1% of forward time: {r.non_gemm}")
        if pd.notna(getattr(r, "softmax_time_ratio", float("nan"))):
            parts.append(f"(e) softmax takes {num(r.softmax_time_ratio)}× the time of the two attention matmuls for "
                         f"{num(r.softmax_flop_ratio, 3)}× their FLOPs")
        out.append(sentence + "; ".join(parts) + ".")
    return "\n".join(out + [""])
