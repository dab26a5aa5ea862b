"""The report's "How fast can it train?" section, from results/ladder.csv: the roofline ladder.

Every statement compares rungs of one (size, context) point: one process, one commit, in turns.
A ratio is a win only where its bootstrap CI excludes 1.
"""

import statistics

import pandas as pd

from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM
from lmperf.measure.settings import setting
from lmperf.measure.stats import ratio_ci, resolved, split_ms
from lmperf.report.attention_kernels import kernels_sentence
from lmperf.report.holds import sooner_clause
from lmperf.report.markdown import drop_empty, num, pct, plural, ratio, share, table, text
from lmperf.report.style import sort_by_size

ANCHOR = "torch_stack"


def times(row: pd.Series) -> list[float]:
    """The rung's per-step times: the replays for a graphed rung, else the launched steps."""
    return split_ms(row["step_times_ms"])


def in_blocks(rows) -> bool:
    """Whether the rungs ran in turns of blocks, each held before it was timed (rows with
    ``launched_turns``), rather than launched in one pass interleaved step by step (the ladder before
    commit 4ecae3f94da1)."""
    return "launched_turns" in rows


def speedup(slow: pd.Series, fast: pd.Series) -> tuple[float, float, float]:
    """slow / fast step time, with its CI: paired where both were launched in one pass interleaved step
    by step (step i of one beside step i of the other)."""
    paired = not (bool(slow["graphed"]) or bool(fast["graphed"]) or in_blocks(slow))
    return ratio_ci(times(slow), times(fast), paired=paired)


def with_ci(value: float, low: float, high: float, digits: int = 2) -> str:
    return f"{num(value, digits)} [{num(low, digits)}, {num(high, digits)}]"


def claim(value: float, low: float, high: float) -> str:
    """A speed ratio (old time / new time) as a sentence fragment: faster or slower where its CI
    excludes 1, 'not resolved' where it holds 1."""
    shown = f"{ratio(value)} (95% CI {num(low)}–{num(high)})"
    if not resolved(low, high):
        return f"{shown}: not resolved"
    return f"{shown}, {'faster' if low > 1 else 'slower'}"


def point_table(point: pd.DataFrame) -> str:
    """One row per rung that ran: its step time with CI, the gain over the previous rung on the ladder,
    rates, the phase split, memory and the loss check; columns that no rung measured (MFU on a CPU)
    are left out. What each rung adds is listed once above the tables, and the rungs that did not run
    below, with why."""
    rows = []
    previous = None
    for _, row in point[point["status"] == "ok"].iterrows():
        step = with_ci(row["median_ms"], row["ci95_low_ms"], row["ci95_high_ms"], 1)
        gain = "—"
        if previous is not None and row["on_ladder"]:
            gain = ratio(speedup(previous, row)[0])
        if row["on_ladder"]:
            previous = row
        rows.append(
            {
                "rung": row["rung"],
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
            }
        )
    if not rows:
        return ""
    frame = pd.DataFrame(rows)
    frame["fwd / bwd / opt ms"] = frame["fwd / bwd / opt ms"].replace("— / — / —", "—")
    return table(drop_empty(frame, keep=["step ms (CI)", "× previous"]))


def rung_list(ladder: pd.DataFrame) -> list[str]:
    """What each rung adds, once for the section, in ladder order."""
    rungs = ladder.drop_duplicates("rung").sort_values("order")
    return [f"- `{r.rung}`: {r.adds}" for r in rungs.itertuples()]


def not_run(point: pd.DataFrame) -> str:
    """The rungs of a point that did not run, grouped by why, as one sentence ("" when all ran); an
    out-of-memory note up to where it starts describing the GPU's state."""
    failed = point[point["status"] != "ok"]
    why = failed["note"].fillna("").astype(str).map(lambda note: note.split(" GPU ")[0].strip())
    groups = [
        ", ".join(f"`{r}`" for r in group["rung"]) + f" ({status}" + (f": {note})" if note else ")")
        for (status, note), group in failed.groupby(["status", why], sort=False)
    ]
    return f"Not run: {'; '.join(groups)}." if groups else ""


def point_gains(ran: pd.DataFrame) -> dict:
    """The speed ratios of one point's rungs that ran (indexed by rung), each (ratio, low, high):
    the largest single gain on the ladder (``best``, with ``before`` and ``after``), the top rung over
    the first (``overall``), over the torch stack launched (``anchor``) and replayed (``anchor_graphed``,
    where the stack replayed too), and where the last rung with a phase split spends its time
    (``phases``: rung and ms per phase)."""
    ladder = ran[ran["on_ladder"].astype(bool)]
    found = {}
    if len(ladder) >= 2:
        gains = [
            (speedup(a, b), a["rung"], b["rung"])
            for (_, a), (_, b) in zip(ladder.iloc[:-1].iterrows(), ladder.iloc[1:].iterrows())
        ]
        found["best"], found["before"], found["after"] = max(gains, key=lambda g: g[0][0])
        found["first"], found["top"] = ladder.iloc[0]["rung"], ladder.iloc[-1]["rung"]
        found["overall"] = speedup(ladder.iloc[0], ladder.iloc[-1])
    if not ladder.empty and ANCHOR in ran.index:  # the top rung that ran against the anchor
        anchor, top = ran.loc[ANCHOR], ladder.iloc[-1]
        found["top"], found["anchor"] = top["rung"], speedup(anchor, top)
        replayed = split_ms(anchor.get("graphed_step_times_ms"))
        if replayed:  # the anchor replayed as a CUDA graph too: GPU time against GPU time
            found["anchor_graphed"] = ratio_ci(replayed, times(top), paired=False)
    split = ladder[ladder["optimizer_ms"].notna()] if "optimizer_ms" in ladder else ladder.iloc[:0]
    if not split.empty:
        row = split.iloc[-1]
        found["phases"] = (row["rung"], {k: row[f"{k}_ms"] for k in ("forward", "backward", "optimizer")})
    return found


def gain_sentences(found: dict) -> list[str]:
    """``point_gains`` in words."""
    out = []
    if "best" in found:
        (best, low, high), before, after = found["best"], found["before"], found["after"]
        if best > 1:
            out.append(f"- Largest single gain: `{after}` over `{before}`, {claim(best, low, high)}.")
        else:
            out.append(
                f"- No rung is faster than the one before it; the least slowdown is `{after}` over `{before}`, "
                f"{claim(best, low, high)}."
            )
        out.append(f"- `{found['top']}` over `{found['first']}`: {claim(*found['overall'])}.")
    if "anchor" in found:
        out.append(f"- `{found['top']}` over the torch stack (`{ANCHOR}`, launched): {claim(*found['anchor'])}.")
    if "anchor_graphed" in found:
        out.append(
            f"- `{found['top']}` over the torch stack replayed as a CUDA graph: {claim(*found['anchor_graphed'])}."
        )
    if "phases" in found:
        rung, parts = found["phases"]
        total = sum(parts.values())
        shares = ", ".join(f"{k} {num(v, 1)} ms ({pct(v / total, 0)})" for k, v in parts.items())
        out.append(f"- Where `{rung}`'s time goes (per phase, launched): {shares}.")
    return out


def point_sentences(point: pd.DataFrame, kernels: pd.DataFrame | None = None) -> list[str]:
    """Computed statements about one (size, context) point; ``kernels`` are its rungs' kernel times."""
    ran = point[point["status"] == "ok"].set_index("rung", drop=False)
    ladder = ran[ran["on_ladder"].astype(bool)]
    ours = ran[ran["attention"] == "flash_triton"] if "attention" in ran else ran.iloc[:0]
    flash = kernels_sentence(ours, "Our FlashAttention", lambda r: f"`{r['rung']}`")
    out = ([f"- {flash}"] if flash else []) + gain_sentences(point_gains(ran))
    out += optimizer_sentences(ran)
    if not ladder.empty:
        out += roofline_sentences(ladder.iloc[-1], kernels)
    out += power_sentences(ran)
    out += turn_sentences(ran)
    out += loss_check_sentences(ran)
    return out


MATMUL_CATEGORIES = ("gemm", "other")  # the GEMMs, and "other", where our attention kernels fall


def roofline_sentences(top: pd.Series, kernels: pd.DataFrame | None = None) -> list[str]:
    """The top rung against its roofline: the step's FLOPs at the matmul rate measured in the process,
    plus the optimizer's 28 B/param at the measured HBM bandwidth, a lower bound on the step.

    The bound is refused where the top rung's own GEMM and attention kernels took less time than its
    FLOPs need at that rate. The rate comes from 8192³ matmuls back to back, which hold an H100 at
    its power limit, while GEMMs between memory-bound kernels can run at a higher clock
    (notes/ladder-power.md): then the benchmark is not the GPU's ceiling, and a "roofline" built on it
    would sit above what was measured.
    """
    if not top["matmul_tflops"] == top["matmul_tflops"]:  # NaN: no GPU rates measured
        return []
    flop_ms = top["model_tflop_per_step"] / top["matmul_tflops"] * 1e3
    if kernels is not None and len(kernels):
        mine = kernels[(kernels["status"] == "ok") & (kernels["rung"] == top["rung"])]
        matmul_ms = mine.loc[mine["category"].isin(MATMUL_CATEGORIES), "ms_per_step"].sum()
        if len(mine) and matmul_ms < flop_ms:
            achieved = top["model_tflop_per_step"] / matmul_ms * 1e3
            return [
                f"- Roofline refused: the step's FLOPs need {num(flop_ms, 1)} ms at the measured bf16 matmul rate "
                f"({num(top['matmul_tflops'], 0)} TF/s, 8192³ matmuls back to back), but `{top['rung']}`'s GEMM "
                f"and attention kernels took {num(matmul_ms, 1)} ms per step (at least {num(achieved, 0)} TF/s). "
                "The benchmark's rate is not this GPU's ceiling inside the step (on the reference H100, matmuls "
                "back to back run at its power limit: notes/ladder-power.md)."
            ]
    optimizer_ms = top["optimizer_bound_ms"]  # 28 B/param at the measured HBM bandwidth (the study's column)
    roofline_ms = flop_ms + optimizer_ms
    return [
        f"- Roofline: {num(flop_ms, 1)} ms of FLOPs at the measured bf16 matmul rate "
        f"({num(top['matmul_tflops'], 0)} TF/s) plus the optimizer's {num(optimizer_ms, 1)} ms at the measured "
        f"HBM bandwidth: {num(roofline_ms, 1)} ms. `{top['rung']}` takes {num(top['median_ms'], 1)} ms, "
        f"{ratio(top['median_ms'] / roofline_ms)} the roofline."
    ]


POWER_CAP, THERMAL = 0x4, 0x8 | 0x20 | 0x40  # clock-event reasons: SW power cap; HW slowdown, SW and HW thermal


def settle_seconds(rows: pd.DataFrame) -> float:
    """How long each timed block was held untimed first: the rows' ``settle_seconds``, or on rows
    written before they carried it, ``replay_settle_s`` (set on the replayed rungs alone)."""
    for column in ("settle_seconds", "replay_settle_s"):
        if column in rows and rows[column].notna().any():
            return rows[column].max()
    return float("nan")


def held_for(rows: pd.DataFrame) -> tuple[float, str]:
    """How a timed block was held untimed first: the most it could be (``settle_seconds``, NaN where
    none), and, on rows written since holds end once the step is steady, that rule with the median and
    longest hold of the rows' turns (``*_turn_settle_s``); "" on older rows, which held the whole time,
    and where no hold was asked for."""
    cap = settle_seconds(rows)
    columns = [c for c in ("launched_turn_settle_s", "replay_turn_settle_s") if c in rows]
    held = [s for c in columns for cell in rows[c] for s in split_ms(cell)]
    if not held or not cap > 0 or "settle_window_s" not in rows:
        return cap, ""
    ruled = rows.dropna(subset=["settle_window_s"])
    windows, window_s, tolerance = (
        setting(ruled, c) for c in ("settle_windows", "settle_window_s", "settle_tolerance")
    )
    sooner = sooner_clause(ruled, present=False)
    return cap, (
        f"until its time per step stopped moving ({plural(int(windows), 'window')} of {num(window_s, 2)} s in a "
        f"row with medians within {pct(tolerance, 1)}){sooner}: {num(statistics.median(held), 2)} s median, "
        f"{num(max(held), 2)} s at most, of the {num(cap, 0)} s allowed"
    )


def power_state(ran: pd.DataFrame) -> dict | None:
    """The SM clock and board power during each rung's replay (nvidia-smi's medians): at the power
    limit, the clock, not the kernel count, sets how fast the GEMMs run (notes/ladder-power.md).

    Which replays the limit held (``capped`` of ``replays``): where the rows carry nvidia-smi's
    clock-event reasons (``by_reasons``), those that saw the power cap's bit (and ``hot``, a thermal
    one); else those whose power, in their hottest turn, reached the rows' ``power_limit_share`` of
    it, where the driver lowers the SM clock to hold the board (a pooled median hides a turn at the
    limit)."""
    sampled = ran[ran["replay_sm_clock_mhz"].notna()] if "replay_sm_clock_mhz" in ran else ran.iloc[:0]
    if sampled.empty:
        return None
    found = {
        "each": [(r.rung, r.replay_sm_clock_mhz, r.replay_power_w) for r in sampled.itertuples()],
        "replays": len(sampled),
        "limit_w": sampled["replay_power_limit_w"].median(),
        "turned": bool("replay_turns" in sampled and (sampled["replay_turns"] > 1).any()),
        "held": held_for(sampled),
        "in_blocks": in_blocks(sampled),
    }
    reasons = sampled.get("replay_clock_event_reasons")
    if reasons is not None and reasons.map(lambda v: isinstance(v, str) and v.startswith("0x")).all():
        masks = reasons.map(lambda v: int(v, 16))
        capped, hot = int(((masks & POWER_CAP) != 0).sum()), int(((masks & THERMAL) != 0).sum())
        return {**found, "by_reasons": True, "capped": capped, "hot": hot}
    hottest = [max(split_ms(r.get("replay_turn_power_w")) or [r["replay_power_w"]]) for _, r in sampled.iterrows()]
    share_of_limit = setting(sampled, "power_limit_share")
    capped = sum(w >= share_of_limit * found["limit_w"] for w in hottest)
    return {**found, "by_reasons": False, "capped": capped, "power_limit_share": share_of_limit}


def power_sentences(ran: pd.DataFrame) -> list[str]:
    """``power_state`` in words."""
    found = power_state(ran)
    if found is None:
        return []
    each = "; ".join(f"`{rung}` {num(mhz, 0)} MHz at {num(w, 0)} W" for rung, mhz, w in found["each"])
    capped, replays = found["capped"], found["replays"]
    if found["by_reasons"]:
        verdict = f"{capped} of {replays} replays had their clock held by the power cap (reason 0x4 in a sample)"
        verdict += f", {found['hot']} by a thermal limit" if found["hot"] else ""
    else:
        verdict = (
            f"{capped} of {replays} replays ran at the power limit (≥ {share(found['power_limit_share'])} of it)"
            if capped
            else "no replay reached the power limit"
        )
        verdict += " in any turn" if found["turned"] else ""
    pooled = ", pooled over each rung's turns" if found["turned"] else ""
    heading = (
        f"SM clock and power in each replay (median of nvidia-smi samples{pooled}, limit {num(found['limit_w'], 0)} W)"
    )
    each_block = "Each block, launched or replayed," if found["in_blocks"] else "Each replay"
    cap, until = found["held"]
    held = (
        f" {each_block} ran untimed {until} before it was timed."
        if until
        else f" {each_block} ran {num(cap, 0)} s untimed before it was timed."
        if cap > 0
        else ""
    )
    return [f"- {heading}: {each}. {verdict}.{held}"]


def turn_sentences(ran: pd.DataFrame) -> list[str]:
    """The graphed rungs' turns (A B C A B C): each turn's median, clock and power, how far one rung's
    turns lie apart, and each ladder step turn by turn. The GPU's power state can change within a
    run (notes/ladder-power.md); a rung's saving that holds in every turn does not come from when it
    ran."""
    turned = ran[ran["replay_turns"] > 1] if "replay_turns" in ran else ran.iloc[:0]
    if turned.empty:
        return []
    medians = {r.rung: split_ms(r.replay_turn_ms) for r in turned.itertuples()}

    def per_turn(cell) -> str:
        return " / ".join(str(cell).split(";"))

    each = "; ".join(
        f"`{r.rung}` {' / '.join(num(m, 1) for m in medians[r.rung])} ms "
        f"({per_turn(r.replay_turn_sm_clock_mhz)} MHz, {per_turn(r.replay_turn_power_w)} W)"
        for r in turned.itertuples()
    )
    spread = {name: max(ms) / min(ms) - 1 for name, ms in medians.items()}
    worst = max(spread, key=spread.get)
    out = [
        f"- {'Every rung' if in_blocks(turned) else 'The graphed rungs'} replayed in "
        f"{int(turned['replay_turns'].max())} turns, one after another "
        f"(A B C A B C); per turn: {each}. Largest spread between one rung's turns: {pct(spread[worst], 1)} "
        f"(`{worst}`)."
    ]
    steps = turned[turned["on_ladder"].astype(bool)]["rung"].tolist()
    for before, after in zip(steps, steps[1:]):
        gains = [a / b for a, b in zip(medians[before], medians[after])]
        out.append(f"- `{after}` over `{before}`, turn by turn: {', '.join(ratio(g) for g in gains)}.")
    return out


def loss_check_sentences(ran: pd.DataFrame) -> list[str]:
    """Same computation: each rung's loss after the check's steps against the first bf16 rung's (rung
    `bf16` where it ran), as a fraction of how far that rung's training moved the loss. A rung whose
    check ran and left a loss that is not finite broke the weights: it fails the check, by name."""
    losses = ran["loss_after_check"] if "loss_after_check" in ran else pd.Series(float("nan"), index=ran.index)
    ran_check = ran["check_steps"].notna() if "check_steps" in ran else losses.notna()
    finite = losses.abs() < float("inf")  # NaN compares false
    broken = [f"`{r}`" for r in ran.loc[ran_check & ~finite, "rung"]]
    why = "the loss is NaN or inf: the rung's steps broke the weights"
    out = [f"- **Not finite after the check**: {', '.join(broken)} ({why})."] if broken else []
    checked = ran[finite]
    bf16 = checked[checked["precision"] == "bf16"]
    if bf16.empty or len(checked) < 2:
        return out
    reference = bf16.iloc[0]
    drop = reference["initial_loss"] - reference["loss_after_check"]
    gaps = (checked["loss_after_check"] - reference["loss_after_check"]).abs() / drop
    worst = gaps.drop(reference["rung"]).idxmax()
    tolerance = setting(checked, "loss_tolerance")
    outside = [f"`{r}`" for r in gaps.index[gaps > tolerance] if checked.loc[r, "precision"] == "bf16"]
    verdict = (
        f"every bf16 rung is within {share(tolerance)} of it"
        if not outside
        else f"outside {share(tolerance)} of it: {', '.join(outside)}"
    )
    if broken:
        verdict = f"of the rungs with a finite loss, {verdict}"
    return [
        f"- Same computation: {int(reference['check_steps'])} steps at learning rate "
        f"{reference.get('check_lr', float('nan')):.3g} from the same weights and batch take `{reference['rung']}`'s "
        f"loss from {num(reference['initial_loss'], 4)} to {num(reference['loss_after_check'], 4)}; "
        f"{verdict} (as a share of that drop). The largest difference is `{worst}`'s, {pct(gaps[worst])} of the drop."
    ] + out


def optimizer_sentences(ran: pd.DataFrame) -> list[str]:
    """Each AdamW's step alone, replayed as a CUDA graph (GPU time), against the measured HBM bandwidth;
    where that was not measured (a CPU), its phase time in the launched step."""
    out = []
    keys = ["optimizer", "weights"] if "weights" in ran else ["optimizer"]
    for _, rows in ran.groupby(keys, sort=False):
        row = rows.iloc[0]
        optimizer = row["optimizer"] + (" (bf16 weights, fp32 masters)" if row.get("weights") == "bf16" else "")
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


def kernel_table(kernels: pd.DataFrame) -> str:
    """GPU ms per step by kernel category (rows) for each profiled rung (columns), in ladder order."""
    ok = kernels[kernels["status"] == "ok"]
    if ok.empty:
        return ""
    by = ok.pivot_table(index="category", columns="rung", values="ms_per_step", aggfunc="sum", sort=False)
    by = by[list(dict.fromkeys(ok["rung"]))].fillna(0.0)
    by = by.loc[by.sum(axis=1).sort_values(ascending=False).index]
    by.loc["total"] = by.sum()
    return table(by.map(lambda ms: num(ms, 1)).reset_index().rename(columns={"category": "GPU ms per step"}))


def kernel_sentences(kernels: pd.DataFrame, top: str) -> list[str]:
    """Where the top rung's GPU time goes, by kernel category, and its largest kernels."""
    mine = kernels[(kernels["status"] == "ok") & (kernels["rung"] == top)]
    if mine.empty:
        return []
    total = mine["ms_per_step"].sum()
    shares = mine.groupby("category")["ms_per_step"].sum().sort_values(ascending=False)
    split = ", ".join(f"{c} {num(ms, 1)} ms ({pct(ms / total, 0)})" for c, ms in shares.items())
    largest = mine.nlargest(3, "ms_per_step")
    named = "; ".join(f"`{k[:60]}` {num(ms, 1)} ms" for k, ms in zip(largest["kernel"], largest["ms_per_step"]))
    return [
        f"- Where `{top}`'s GPU time goes (kernels under torch.profiler, {num(total, 1)} ms per step): {split}. "
        f"Largest kernels: {named}."
    ]


def timing_method(ladder: pd.DataFrame) -> str:
    """How the rungs were timed, from the rows: in turns or interleaved, held how long before each
    timed block, and whether any rung was replayed as a CUDA graph."""
    replayed = (
        bool(ladder["graphed"].astype(bool).any()) and (ladder[ladder["graphed"].astype(bool)]["status"] == "ok").any()
    )
    if not in_blocks(ladder):
        return (
            "interleaved; steps are launched, except the rungs from `cuda_graph` on, which replay the step as "
            "a CUDA graph."
            if replayed
            else "interleaved; steps are launched."
        )
    cap, until = held_for(ladder)
    if cap == cap and cap > 0:
        held = (
            f"runs untimed {until or f'for {num(cap, 0)} s'} (the GPU's clock at its power limit follows the last "
            "second or so of work), then is timed"
        )
    else:
        timed = ladder[(ladder["status"] == "ok") & ladder["launched_settle_steps"].notna()]
        per_turn = (timed["launched_settle_steps"] / timed["launched_turns"]).median() if len(timed) else float("nan")
        held = (
            f"runs {plural(int(round(per_turn)), 'untimed step')}, then is timed"
            if per_turn == per_turn
            else "then is timed"
        )
    replay = (
        " In each turn a rung is launched, then replayed as a CUDA graph; the rungs from `cuda_graph` on are only "
        "replayed."
        if replayed
        else ""
    )
    return f"in turns, A B C A B C, block by block: each block starts from the initial weights, {held}.{replay}"


# The columns that make a ladder rung and an e2e row the same train step.
SAME_STEP = ["size", "context_length", "batch_size", "precision", "compile", "attention", "optimizer"]
COMPILE_AS_E2E = {"eager": "eager", "blocks": "compiled"}  # the ladder's per-block compile is e2e's


def against_e2e(ladder: pd.DataFrame, e2e: pd.DataFrame) -> pd.DataFrame:
    """Every launched ladder rung that is an e2e train step (same size, context, batch, precision,
    compile mode, attention and optimizer), with both studies' times: graphed where both replayed the
    step, else launched (on a CPU)."""
    rungs = ladder[(ladder["status"] == "ok") & ~ladder["graphed"].astype(bool)]
    rungs = rungs[rungs["compile"].isin(COMPILE_AS_E2E)].assign(compile=lambda f: f["compile"].map(COMPILE_AS_E2E))
    steps = e2e[(e2e["status"] == "ok") & (e2e["mode"] == "train_step")]
    if "weights" in rungs:
        rungs = rungs[rungs["weights"].fillna("fp32") == "fp32"]
    times = ["median_ms", "graphed_median_ms"]  # a CPU run has no graphed column
    rungs, steps = (frame.reindex(columns=frame.columns.union(times, sort=False)) for frame in (rungs, steps))
    pairs = rungs.merge(steps, on=SAME_STEP, suffixes=("_ladder", "_e2e"))
    if pairs.empty:
        return pairs
    graphed = pairs["graphed_median_ms_ladder"].notna() & pairs["graphed_median_ms_e2e"].notna()
    pick = {
        side: pairs[f"graphed_median_ms_{side}"].where(graphed, pairs[f"median_ms_{side}"])
        for side in ("e2e", "ladder")
    }
    return pairs.assign(
        timing=graphed.map({True: "graphed", False: "launched"}),
        e2e_ms=pick["e2e"],
        ladder_ms=pick["ladder"],
        ratio=pick["ladder"] / pick["e2e"],
    )


def agreement(ladder: pd.DataFrame, e2e: pd.DataFrame) -> list[str]:
    """The ladder's rungs beside e2e's rows of the same step: a table and how far apart they are."""
    pairs = against_e2e(ladder, e2e)
    if pairs.empty:
        return []
    pairs = sort_by_size(pairs, ["size", "context_length", "order"])
    shown = pd.DataFrame(
        {
            "size": pairs["size"],
            "context": pairs["context_length"],
            "rung": pairs["rung"],
            "timing": pairs["timing"],
            "e2e (ms)": pairs["e2e_ms"].map(num),
            "ladder (ms)": pairs["ladder_ms"].map(num),
            "ladder / e2e": pairs["ratio"].map(lambda r: num(r, 3)),
        }
    )
    for side in ("e2e", "ladder"):
        column = {"e2e": "graphed_sm_clock_mhz", "ladder": "replay_sm_clock_mhz"}[side]
        if column in pairs and pairs[column].notna().any():
            shown[f"{side} SM clock (MHz)"] = pairs[column].map(lambda x: num(x, 0))
    worst = pairs.loc[(pairs["ratio"] - 1).abs().idxmax()]
    return [
        "### The ladder against e2e",
        "",
        "The rungs that are one of e2e's train steps (same size, context, batch, precision, compile mode, "
        "attention and optimizer), as each study timed them: graphed where both replayed the step, else launched.",
        "",
        table(shown),
        "",
        f"Over the {plural(len(pairs), 'train step')} both studies time, they differ by at most "
        f"{pct(abs(worst['ratio'] - 1))}: "
        f"rung `{worst['rung']}` at {worst['size']}, context {worst['context_length']}, takes "
        f"{ratio(worst['ratio'])} e2e's time ({worst['timing']}).",
        "",
    ]


def sizes_left_out(ladder: pd.DataFrame, e2e: pd.DataFrame | None) -> str:
    """The model sizes e2e measured and the ladder did not (the grid's ``ladder.sizes``), in words."""
    if e2e is None or e2e.empty:
        return ""
    ran = list(dict.fromkeys(sort_by_size(ladder, ["size"])["size"]))
    left = [s for s in dict.fromkeys(sort_by_size(e2e, ["size"])["size"]) if s not in ran]
    if not left:
        return ""
    return (
        f"This run's ladder ran at {words(ran)}, not at {words(left)}, which e2e measured (the grid's "
        "`ladder.sizes`: the full grid runs the smallest and the largest model to save time; `wide.yaml` runs "
        "every size)."
    )


def words(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


def render(ladder: pd.DataFrame, kernels: pd.DataFrame | None = None, e2e: pd.DataFrame | None = None) -> str:
    mfu = (
        " MFU is against the bf16 dense peak for every rung (so it ranks rungs as their speed does); train-step "
        "FLOPs are 3× the forward's."
        if "mfu" in ladder and ladder["mfu"].notna().any()
        else ""
    )
    left_out = sizes_left_out(ladder, e2e)
    out = [
        "## How fast can it train?",
        "",
        "The roofline ladder (`results/ladder.csv`): the handout's train step, then one technique added per rung; "
        "beside it torch's fused AdamW in our rung's place, and the torch stack a user gets without lmperf "
        "(whole-model `torch.compile`, SDPA, `torch.optim.AdamW(fused=True)`). All rungs of a point are timed in one "
        f"process on one model, {timing_method(ladder)}{mfu} Medians with 95% bootstrap CIs. The rungs:",
        "",
        *rung_list(ladder),
        "",
        *([left_out, ""] if left_out else []),
        "![The roofline ladder](figures/ladder_waterfall.png)",
        "",
    ]
    ladder = sort_by_size(ladder, ["size", "context_length", "order"])
    for (size, ctx), point in ladder.groupby(["size", "context_length"], sort=False):
        device = text(point["device_name"].iloc[0])
        shown = point_table(point)
        out += [f"### {size}, context {ctx} ({device})", "", *([shown, ""] if shown else [])]
        skipped = not_run(point)
        out += [skipped, ""] if skipped else []
        mine = (
            pd.DataFrame()
            if kernels is None
            else kernels[(kernels["size"] == size) & (kernels["context_length"] == ctx)]
        )
        sentences = point_sentences(point, mine)
        ran = point[(point["status"] == "ok") & point["on_ladder"].astype(bool)]
        if not mine.empty and not ran.empty:
            sentences += kernel_sentences(mine, ran["rung"].iloc[-1])
        out += sentences + ([""] if sentences else [])
        profiled = kernel_table(mine) if not mine.empty else ""
        if profiled:
            out += [
                "GPU time per step by kernel category under torch.profiler (graphed rungs in their replay, the "
                "others launched):",
                "",
                profiled,
                "",
            ]
    if e2e is not None:
        out += agreement(ladder, e2e)
    return "\n".join(out)
