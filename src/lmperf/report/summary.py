"""The report's opening summary: one line per key finding, each computed from the same rows and
helpers as the section it points to, and left out where this run has no rows for it."""

import re

import pandas as pd

from lmperf import grid
from lmperf.measure.settings import setting
from lmperf.measure.stats import resolved
from lmperf.report import cost
from lmperf.report.attention_figures import held_mib
from lmperf.report.attention_section import fitted_exponent
from lmperf.report.comm_section import human_bytes
from lmperf.report.e2e_analysis import GPU_MS, LAUNCHED_MS, gpu_bound, handout_model, speedup
from lmperf.report.ladder_section import claim
from lmperf.report.ladder_section import speedup as rung_speedup
from lmperf.report.markdown import num, ok, pct, plural, ratio, share
from lmperf.report.memory_section import AT_PEAK, e2e_agreement, peak
from lmperf.report.profile_section import answers, short_name
from lmperf.report.style import sort_by_size


def faster(value: float) -> str:
    """A speed ratio (old time / new time) with the word its side of 1 calls for."""
    return f"{ratio(value)} the speed, {'faster' if value > 1 else 'slower' if value < 1 else 'the same'}"


def see(section: str) -> str:
    """A link to a section of the report by its heading (GitHub's anchor: lower case, punctuation
    dropped, spaces as hyphens)."""
    anchor = re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-")
    return f"([{section}](#{anchor}))"


def step_time(e2e: pd.DataFrame) -> str | None:
    """The handout model's train step at the largest size and context measured, fp32 eager, and what
    bf16 autocast and torch.compile do to the train step (median over the grid's points)."""
    rows = ok(handout_model(e2e))
    rows = rows[rows["mode"] == "train_step"]
    if rows.empty:
        return None
    value, timing = (GPU_MS, "graphed") if not gpu_bound(rows).empty else (LAUNCHED_MS, "launched")
    rows = rows.dropna(subset=[value])
    base = rows[(rows["precision"] == "fp32") & (rows["compile"] == "eager")]
    pick = (base if len(base) else rows).sort_values(["params", "context_length"]).iloc[-1]
    line = (
        f"- **Train step** ({timing}): {num(pick[value])} ms for {pick['size']} "
        f"({num(pick['params'] / 1e6, 1)} M parameters) at context {pick['context_length']}, batch "
        f"{pick['batch_size']}, {pick['precision']} {pick['compile']}."
    )
    speedups = (  # each list's baseline first; from GPU time only, as the e2e section states them
        (("precision", grid.PRECISIONS, "bf16 autocast"), ("compile", grid.COMPILE_MODES, "torch.compile"))
        if timing == "graphed"
        else ()
    )
    for column, (slow, fast), what in speedups:
        gains = speedup(rows, column, slow, fast, value)
        if len(gains):
            line += f" {what}: {faster(gains['speedup'].median())} (median of {len(gains)} points)."
    return f"{line} {see('End-to-end benchmarking')}"


def profile_finding(kernels: pd.DataFrame | None, timing: pd.DataFrame | None, e2e: pd.DataFrame) -> str | None:
    """The top forward kernel (operator on a CPU), the GEMM share, and the profiler against the e2e study."""
    if kernels is None or timing is None or ok(kernels).empty or ok(timing).empty:
        return None
    rows = sort_by_size(answers(kernels, timing, e2e), ["size", "context_length"])
    top = rows.dropna(subset=["top_forward"]) if "top_forward" in rows else rows.iloc[:0]
    if top.empty:
        return None
    first = top.iloc[-1]
    kernel = "kernel" if (ok(timing)["device_type"] == "cuda").any() else "operator"
    line = (
        f"- **Profile** ({first['size']}, context {first['context_length']}): `{short_name(first['top_forward'])}` "
        f"leads the forward pass; GEMMs take {pct(first['gemm_share_forward'])} of its {kernel} time"
    )
    if "gemm_share_train" in first and pd.notna(first["gemm_share_train"]):
        line += f" and {pct(first['gemm_share_train'])} of the train step's"
    line += "."
    if "agreement" in rows and rows["agreement"].notna().any():
        worst = rows["agreement"].abs().max()
        line += (
            f" Check: the profiled forward differs from the e2e study's unprofiled median by up to {pct(worst)} "
            f"({plural(len(rows['agreement'].dropna()), 'point')})."
        )
    return line + " " + see("Profiling")


def memory_finding(memory: pd.DataFrame | None, e2e: pd.DataFrame) -> str | None:
    """The steady train step's peak at the largest context, what holds it, and the check against e2e."""
    if memory is None or ok(memory).empty:
        return None
    rows = ok(memory)
    steady = rows[(rows["state"] == "steady") & (rows["mode"] == "train_step")].sort_values("context_length")
    if steady.empty:
        return None
    fp32 = steady[steady["precision"] == "fp32"]
    row = (fp32 if len(fp32) else steady).iloc[-1]
    line = (
        f"- **Memory**: the steady {row['precision']} train step of {row['size']} at context "
        f"{row['context_length']} peaks at {num(peak(row), 1)} MiB"
    )
    parts = {name: row.get(column) for name, column in AT_PEAK.items()}
    if all(pd.notna(v) for v in parts.values()):
        line += " (" + ", ".join(f"{name} {num(v, 1)}" for name, v in parts.items()) + " MiB at the peak)"
    line += "."
    joined = e2e_agreement(memory, e2e)
    if len(joined):
        worst, target = joined["difference"].abs().max(), setting(memory, "e2e_agreement")
        line += (
            f" Check: the e2e study's peak of the same points is within {pct(worst)} "
            f"(target {share(target)}: {'met' if worst <= target else 'not met'})."
        )
    return line + " " + see("Memory")


def attention_finding(attention: pd.DataFrame) -> str | None:
    """How naive attention's memory held for backward grows with the sequence, and where it runs out."""
    eager = attention[attention["compile"] == "eager"]
    fitted = ok(eager).assign(held=held_mib(ok(eager))).dropna(subset=["held"])
    slope = fitted_exponent(fitted) if len(fitted) else float("nan")
    if slope != slope:
        return None
    line = f"- **Naive attention**: memory held for backward grows as seq^{num(slope)}"
    ooms = eager[eager["status"] == "oom"]
    line += f"; out of memory from seq {int(ooms['seq'].min())}." if len(ooms) else "; every point fit in memory."
    return line + " " + see("Attention at scale")


def ddp_finding(train: pd.DataFrame) -> str | None:
    """The fastest bucketed DDP variant against torch DDP, at the largest global batch."""
    rows = ok(train)
    if rows.empty or "vs_anchor" not in rows:
        return None
    batch = rows["global_batch"].max()
    ours = rows["variant"].str.startswith("bucketed") & ~rows["variant"].str.endswith("-bf16")  # fp32 on the wire
    bucketed = rows[(rows["global_batch"] == batch) & ours]
    bucketed = bucketed.dropna(subset=["vs_anchor"])
    if bucketed.empty:
        return None
    best = bucketed.loc[bucketed["median_ms"].idxmin()]
    low, high = best["vs_anchor_ci95_low"], best["vs_anchor_ci95_high"]
    verdict = (
        f"{'faster' if high < 1 else 'slower'} than torch DDP" if resolved(low, high) else "not resolved from torch DDP"
    )
    return (
        f"- **Data parallel** ({int(best['world_size'])} ranks over {best['backend']}, global batch {batch}): the "
        f"fastest bucketed variant, {best['variant']}, takes {num(best['vs_anchor'], 3)}× torch DDP's step time "
        f"(95% CI {num(low, 3)}–{num(high, 3)}): {verdict}. " + see("Data parallel training")
    )


def allreduce_finding(allreduce: pd.DataFrame) -> str | None:
    """The bus bandwidth at the largest size swept, per backend and rank count."""
    rows = ok(allreduce)
    if rows.empty:
        return None
    largest = rows.sort_values("bytes").groupby(["backend", "world_size"]).tail(1)
    parts = "; ".join(
        f"{r.backend} with {r.world_size} ranks {num(r.busbw_gbps)} GB/s"
        for r in largest.sort_values(["backend", "world_size"]).itertuples()
    )
    size = largest["bytes"].max()
    return f"- **All-reduce** bus bandwidth at {human_bytes(size)}: {parts}. " + see("Communication")


def ladder_finding(ladder: pd.DataFrame | None) -> str | None:
    """The top rung that ran against the first, at each point: the ladder's net gain."""
    if ladder is None or ladder.empty:
        return None
    parts = []
    for (size, ctx), point in ladder.sort_values("order").groupby(["size", "context_length"], sort=False):
        ran = point[(point["status"] == "ok") & point["on_ladder"].astype(bool)]
        if len(ran) >= 2:
            first, last = ran.iloc[0], ran.iloc[-1]
            parts.append(
                f"{size} at context {ctx}, `{last['rung']}` over `{first['rung']}` {claim(*rung_speedup(first, last))}"
            )
    if not parts:
        return None
    return "- **Ladder**: " + "; ".join(parts) + ". " + see("How fast can it train?")


def cost_finding(jobs: pd.DataFrame) -> str | None:
    if jobs.empty:
        return None
    wall, gpu = cost.totals(jobs)
    used = f", {num(gpu)} GPU-minutes" if cost.held_gpus(jobs) else ", no GPU time"
    longest = jobs.loc[jobs["wall_s"].idxmax()]
    name = str(longest["job"]).removeprefix("benchmarks/").removesuffix(".tsv")
    return (
        f"- **Cost**: {len(jobs)} measuring jobs, {num(wall)} minutes of wall time{used}; the longest job, "
        f"`{name}`, took {num(longest['wall_s'] / 60)} minutes. " + see("Cost of this run")
    )


def render(frames: dict[str, pd.DataFrame]) -> str:
    """The "Summary" section from the report's frames (``render.render``'s, keyed by result name)."""
    e2e = frames["e2e"]
    lines = [
        step_time(e2e),
        profile_finding(frames.get("profile"), frames.get("profile_timing"), e2e),
        memory_finding(frames.get("memory"), e2e),
        attention_finding(frames["attention"]),
        ladder_finding(frames.get("ladder")),
        ddp_finding(frames["ddp_train"]),
        allreduce_finding(frames["allreduce"]),
        cost_finding(frames["cost"]),
    ]
    found = [line for line in lines if line]
    if not found:
        return ""
    return "\n".join(
        ["## Summary", "", "Key findings of this run; each names the section with the details.", "", *found, ""]
    )
