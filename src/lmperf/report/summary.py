"""The report's opening summary: one line per key finding, each computed from the same rows and
helpers as the section it points to, and left out where this run has no rows for it."""

import pandas as pd

from lmperf import grid
from lmperf.measure.settings import setting
from lmperf.measure.stats import resolved
from lmperf.report import cost
from lmperf.report.attention_figures import held_mib
from lmperf.report.attention_section import fitted_exponent
from lmperf.report.comm_section import human_bytes
from lmperf.report.ddp_section import ours_in_fp32
from lmperf.report.e2e_analysis import GPU_MS, LAUNCHED_MS, gpu_bound, handout_model, speedup
from lmperf.report.ladder_section import claim
from lmperf.report.ladder_section import speedup as rung_speedup
from lmperf.report.markdown import anchor, num, ok, pct, plural, ratio, share
from lmperf.report.memory_section import AT_PEAK, e2e_agreement, peak
from lmperf.report.profile_section import answers, short_name
from lmperf.report.style import sort_by_size


def faster(value: float) -> str:
    """A speed ratio (old time / new time) with the word its side of 1 calls for."""
    return f"{ratio(value)} the speed, {'faster' if value > 1 else 'slower' if value < 1 else 'the same'}"


def see(section: str) -> str:
    """A link to a section of the report by its heading."""
    return f"([{section}]({anchor(section)}))"


def train_step_finding(e2e: pd.DataFrame) -> dict | None:
    """The handout model's train step at the largest size and context measured (fp32 eager where it
    ran), and what bf16 autocast and torch.compile do to the train step: ``timing`` (graphed or
    launched), ``ms``, the point (``size``, ``params``, ``context_length``, ``batch_size``,
    ``precision``, ``compile``) and ``speedups`` ({what: (median speed-up, points)}, from GPU time
    only, as the e2e section states them). None without a train step."""
    rows = ok(handout_model(e2e))
    rows = rows[rows["mode"] == "train_step"]
    if rows.empty:
        return None
    value, timing = (GPU_MS, "graphed") if not gpu_bound(rows).empty else (LAUNCHED_MS, "launched")
    rows = rows.dropna(subset=[value])
    base = rows[(rows["precision"] == "fp32") & (rows["compile"] == "eager")]
    pick = (base if len(base) else rows).sort_values(["params", "context_length"]).iloc[-1]
    found = {"timing": timing, "ms": pick[value], "speedups": {}}
    found |= {key: pick[key] for key in ("size", "params", "context_length", "batch_size", "precision", "compile")}
    speedups = (  # each list's baseline first
        (("precision", grid.PRECISIONS, "bf16 autocast"), ("compile", grid.COMPILE_MODES, "torch.compile"))
        if timing == "graphed"
        else ()
    )
    for column, (slow, fast), what in speedups:
        gains = speedup(rows, column, slow, fast, value)
        if len(gains):
            found["speedups"][what] = (gains["speedup"].median(), len(gains))
    return found


def train_step_line(found: dict) -> str:
    """``train_step_finding`` in words."""
    line = (
        f"- **Train step** ({found['timing']}): {num(found['ms'])} ms for {found['size']} "
        f"({num(found['params'] / 1e6, 1)} M parameters) at context {found['context_length']}, batch "
        f"{found['batch_size']}, {found['precision']} {found['compile']}."
    )
    for what, (median, points) in found["speedups"].items():
        line += f" {what}: {faster(median)} (median of {points} points)."
    return f"{line} {see('End-to-end benchmarking')}"


def profile_finding(kernels: pd.DataFrame | None, timing: pd.DataFrame | None, e2e: pd.DataFrame) -> dict | None:
    """The top forward kernel (operator on a CPU) at the largest point profiled and the GEMM share of
    its forward (``gemm_share_forward``) and train step (``gemm_share_train``, None where not
    profiled), with ``on_gpu``; and the profiler against the e2e study: the largest difference
    (``worst_agreement``, None without a point to compare) over ``agreement_points`` points."""
    if kernels is None or timing is None or ok(kernels).empty or ok(timing).empty:
        return None
    rows = sort_by_size(answers(kernels, timing, e2e), ["size", "context_length"])
    top = rows.dropna(subset=["top_forward"]) if "top_forward" in rows else rows.iloc[:0]
    if top.empty:
        return None
    first = top.iloc[-1]
    train = first["gemm_share_train"] if "gemm_share_train" in first else None
    agreement = rows["agreement"].dropna() if "agreement" in rows else pd.Series(dtype=float)
    return {
        "size": first["size"],
        "context_length": first["context_length"],
        "top_forward": first["top_forward"],
        "on_gpu": bool((ok(timing)["device_type"] == "cuda").any()),
        "gemm_share_forward": first["gemm_share_forward"],
        "gemm_share_train": train if pd.notna(train) else None,
        "worst_agreement": agreement.abs().max() if len(agreement) else None,
        "agreement_points": len(agreement),
    }


def profile_line(found: dict) -> str:
    """``profile_finding`` in words."""
    kernel = "kernel" if found["on_gpu"] else "operator"
    line = (
        f"- **Profile** ({found['size']}, context {found['context_length']}): `{short_name(found['top_forward'])}` "
        f"leads the forward pass; GEMMs take {pct(found['gemm_share_forward'])} of its {kernel} time"
    )
    if found["gemm_share_train"] is not None:
        line += f" and {pct(found['gemm_share_train'])} of the train step's"
    line += "."
    if found["worst_agreement"] is not None:
        line += (
            f" Check: the profiled forward differs from the e2e study's unprofiled median by up to "
            f"{pct(found['worst_agreement'])} ({plural(found['agreement_points'], 'point')})."
        )
    return line + " " + see("Profiling")


def memory_finding(memory: pd.DataFrame | None, e2e: pd.DataFrame) -> dict | None:
    """The steady train step's peak (``peak_mib``) at the largest context (fp32 where it ran), what
    holds it (``at_peak``: MiB by part, None where not split), and the check against e2e: the largest
    difference from its peak of the same points (``worst_e2e``, None without one) and the ``target``."""
    if memory is None or ok(memory).empty:
        return None
    rows = ok(memory)
    steady = rows[(rows["state"] == "steady") & (rows["mode"] == "train_step")].sort_values("context_length")
    if steady.empty:
        return None
    fp32 = steady[steady["precision"] == "fp32"]
    row = (fp32 if len(fp32) else steady).iloc[-1]
    parts = {name: row.get(column) for name, column in AT_PEAK.items()}
    joined = e2e_agreement(memory, e2e)
    return {
        "precision": row["precision"],
        "size": row["size"],
        "context_length": row["context_length"],
        "peak_mib": peak(row),
        "at_peak": parts if all(pd.notna(v) for v in parts.values()) else None,
        "worst_e2e": joined["difference"].abs().max() if len(joined) else None,
        "target": setting(memory, "e2e_agreement") if len(joined) else None,
    }


def memory_line(found: dict) -> str:
    """``memory_finding`` in words."""
    line = (
        f"- **Memory**: the steady {found['precision']} train step of {found['size']} at context "
        f"{found['context_length']} peaks at {num(found['peak_mib'], 1)} MiB"
    )
    if found["at_peak"] is not None:
        line += " (" + ", ".join(f"{name} {num(v, 1)}" for name, v in found["at_peak"].items()) + " MiB at the peak)"
    line += "."
    if found["worst_e2e"] is not None:
        worst, target = found["worst_e2e"], found["target"]
        line += (
            f" Check: the e2e study's peak of the same points is within {pct(worst)} "
            f"(target {share(target)}: {'met' if worst <= target else 'not met'})."
        )
    return line + " " + see("Memory")


def attention_finding(attention: pd.DataFrame) -> dict | None:
    """How naive attention's memory held for backward grows with the sequence (``exponent`` of seq)
    and the first sequence length out of memory (``oom_from``, None where every point fit)."""
    eager = attention[attention["compile"] == "eager"]
    fitted = ok(eager).assign(held=held_mib(ok(eager))).dropna(subset=["held"])
    slope = fitted_exponent(fitted) if len(fitted) else float("nan")
    if slope != slope:
        return None
    ooms = eager[eager["status"] == "oom"]
    return {"exponent": slope, "oom_from": int(ooms["seq"].min()) if len(ooms) else None}


def attention_line(found: dict) -> str:
    """``attention_finding`` in words."""
    line = f"- **Naive attention**: memory held for backward grows as seq^{num(found['exponent'])}"
    oom = found["oom_from"]
    line += f"; out of memory from seq {oom}." if oom is not None else "; every point fit in memory."
    return line + " " + see("Attention at scale")


def ddp_finding(train: pd.DataFrame) -> dict | None:
    """The fastest bucketed DDP variant with fp32 on the wire at the largest global batch: its step
    time over torch DDP's (``vs_anchor``) with the 95% CI (``low``, ``high``), and where it ran."""
    rows = ok(train)
    if rows.empty or "vs_anchor" not in rows:
        return None
    batch = rows["global_batch"].max()
    ours = ours_in_fp32(rows["variant"])
    bucketed = rows[(rows["global_batch"] == batch) & ours]
    bucketed = bucketed.dropna(subset=["vs_anchor"])
    if bucketed.empty:
        return None
    best = bucketed.loc[bucketed["median_ms"].idxmin()]
    return {
        "world_size": int(best["world_size"]),
        "backend": best["backend"],
        "global_batch": batch,
        "variant": best["variant"],
        "vs_anchor": best["vs_anchor"],
        "low": best["vs_anchor_ci95_low"],
        "high": best["vs_anchor_ci95_high"],
    }


def ddp_line(found: dict) -> str:
    """``ddp_finding`` in words: faster or slower than torch DDP where the CI excludes 1."""
    low, high = found["low"], found["high"]
    verdict = (
        f"{'faster' if high < 1 else 'slower'} than torch DDP" if resolved(low, high) else "not resolved from torch DDP"
    )
    return (
        f"- **Data parallel** ({found['world_size']} ranks over {found['backend']}, global batch "
        f"{found['global_batch']}): the fastest bucketed variant, {found['variant']}, takes "
        f"{num(found['vs_anchor'], 3)}× torch DDP's step time (95% CI {num(low, 3)}–{num(high, 3)}): {verdict}. "
        + see("Data parallel training")
    )


def allreduce_finding(allreduce: pd.DataFrame) -> dict | None:
    """The bus bandwidth at the largest size swept per backend and rank count: ``bytes`` (the largest
    of those sizes) and ``busbw`` ([(backend, ranks, GB/s)], sorted by backend and ranks)."""
    rows = ok(allreduce)
    if rows.empty:
        return None
    largest = rows.sort_values("bytes").groupby(["backend", "world_size"]).tail(1)
    return {
        "bytes": largest["bytes"].max(),
        "busbw": [
            (r.backend, r.world_size, r.busbw_gbps) for r in largest.sort_values(["backend", "world_size"]).itertuples()
        ],
    }


def allreduce_line(found: dict) -> str:
    """``allreduce_finding`` in words."""
    parts = "; ".join(f"{backend} with {ranks} ranks {num(gbps)} GB/s" for backend, ranks, gbps in found["busbw"])
    return f"- **All-reduce** bus bandwidth at {human_bytes(found['bytes'])}: {parts}. " + see("Communication")


def ladder_finding(ladder: pd.DataFrame | None) -> list[dict] | None:
    """The top rung that ran against the first, at each point (the ladder's net gain): one dict per
    point with ``size``, ``context_length``, ``first`` and ``top`` rungs and ``speedup`` (ratio, low,
    high). None where no point ran two rungs."""
    if ladder is None or ladder.empty:
        return None
    points = []
    for (size, ctx), point in ladder.sort_values("order").groupby(["size", "context_length"], sort=False):
        ran = point[(point["status"] == "ok") & point["on_ladder"].astype(bool)]
        if len(ran) >= 2:
            first, last = ran.iloc[0], ran.iloc[-1]
            points.append(
                {
                    "size": size,
                    "context_length": ctx,
                    "first": first["rung"],
                    "top": last["rung"],
                    "speedup": rung_speedup(first, last),
                }
            )
    return points or None


def ladder_line(points: list[dict]) -> str:
    """``ladder_finding`` in words."""
    parts = [
        f"{p['size']} at context {p['context_length']}, `{p['top']}` over `{p['first']}` {claim(*p['speedup'])}"
        for p in points
    ]
    return "- **Ladder**: " + "; ".join(parts) + ". " + see("How fast can it train?")


def cost_finding(jobs: pd.DataFrame) -> dict | None:
    """What measuring cost: ``jobs``, ``wall_minutes``, ``gpu_minutes`` (None where no job held a
    GPU), and the longest job (``longest``, its benchmark file) with its ``longest_minutes``."""
    if jobs.empty:
        return None
    wall, gpu = cost.totals(jobs)
    longest = jobs.loc[jobs["wall_s"].idxmax()]
    return {
        "jobs": len(jobs),
        "wall_minutes": wall,
        "gpu_minutes": gpu if cost.held_gpus(jobs) else None,
        "longest": str(longest["job"]),
        "longest_minutes": longest["wall_s"] / 60,
    }


def cost_line(found: dict) -> str:
    """``cost_finding`` in words, the longest job named without its benchmark file's folder and suffix."""
    used = f", {num(found['gpu_minutes'])} GPU-minutes" if found["gpu_minutes"] is not None else ", no GPU time"
    name = found["longest"].removeprefix("benchmarks/").removesuffix(".tsv")
    return (
        f"- **Cost**: {found['jobs']} measuring jobs, {num(found['wall_minutes'])} minutes of wall time{used}; the "
        f"longest job, `{name}`, took {num(found['longest_minutes'])} minutes. " + see("Cost of this run")
    )


def render(frames: dict[str, pd.DataFrame]) -> str:
    """The "Summary" section from the report's frames (``render.render``'s, keyed by result name):
    each finding's numbers first, then the line that states them, in the order the report reads."""
    e2e = frames["e2e"]
    findings = [
        (train_step_line, train_step_finding(e2e)),
        (profile_line, profile_finding(frames.get("profile"), frames.get("profile_timing"), e2e)),
        (memory_line, memory_finding(frames.get("memory"), e2e)),
        (attention_line, attention_finding(frames["attention"])),
        (ladder_line, ladder_finding(frames.get("ladder"))),
        (ddp_line, ddp_finding(frames["ddp_train"])),
        (allreduce_line, allreduce_finding(frames["allreduce"])),
        (cost_line, cost_finding(frames["cost"])),
    ]
    found = [line(numbers) for line, numbers in findings if numbers is not None]
    if not found:
        return ""
    return "\n".join(
        ["## Summary", "", "Key findings of this run; each names the section with the details.", "", *found, ""]
    )
