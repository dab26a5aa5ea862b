"""The report's "FlashAttention" section: the leaderboard shape and the sweep, from data, and the
published FlashAttention-3 figures beside them as an anchor (``published/flash_attention_3.csv``)."""

from pathlib import Path

import pandas as pd

from lmperf import grid
from lmperf.measure.attention_flops import ATTENTION_PASS_FLOPS
from lmperf.measure.settings import setting
from lmperf.measure.stats import ratio_ci, resolved, split_ms
from lmperf.report.attention_kernels import kernels_sentence
from lmperf.report.markdown import num, ok, share, table, text

PASS_LABELS = {"forward": "forward", "backward": "backward", "forward_backward": "forward + backward"}


def _skipped(frame: pd.DataFrame, what: str) -> str | None:
    if len(ok(frame)):
        return None
    first = frame.iloc[0]
    return f"The {what} did not run on **{text(first['device_name'])}**: {text(first['note'])}."


def gpu_time_column(frame: pd.DataFrame) -> str:
    """The column that times the GPU: the CUDA-graph replay where the study measured one."""
    graphed = "graphed_median_ms"
    return graphed if graphed in frame and frame[graphed].notna().any() else "median_ms"


def ours_against(rows: pd.DataFrame, pass_: str, other: str, column: str = "median_ms") -> dict | None:
    """Ours against another implementation on one pass: both times and the speed ratio (theirs / ours).
    Where the study timed interleaved rounds (``round_ms`` beside ``median_ms``), the ratio is paired
    round by round with a bootstrap CI (``low``, ``high``, ``rounds``); else it is the bare ratio."""
    ours = rows[(rows["implementation"] == "ours_triton") & (rows["pass"] == pass_)]
    theirs = rows[(rows["implementation"] == other) & (rows["pass"] == pass_)]
    if ours.empty or theirs.empty or ours[column].isna().all() or theirs[column].isna().all():
        return None
    found = {"ours_ms": ours[column].iloc[0], "theirs_ms": theirs[column].iloc[0]}
    rounds = column.replace("median_ms", "round_ms")
    if rounds in rows and ours[rounds].notna().all() and theirs[rounds].notna().all():
        ours_rounds = split_ms(ours[rounds].iloc[0])
        ratio, low, high = ratio_ci(split_ms(theirs[rounds].iloc[0]), ours_rounds)
        return {**found, "ratio": ratio, "low": low, "high": high, "rounds": len(ours_rounds)}
    return {**found, "ratio": found["theirs_ms"] / found["ours_ms"]}


def _ratio_sentence(rows: pd.DataFrame, pass_: str, other: str, column: str = "median_ms") -> str:
    """``ours_against`` in words: a paired ratio whose CI holds 1 is "not resolved"."""
    found = ours_against(rows, pass_, other, column)
    if found is None:
        return ""
    how = "launched" if column == "median_ms" else "replayed as a CUDA graph"
    head = f"{PASS_LABELS[pass_].capitalize()}, {how}: ours takes {num(found['ours_ms'], 3)} ms,"
    if "rounds" in found:
        low, high = found["low"], found["high"]
        verdict = "not resolved" if not resolved(low, high) else ("ours faster" if low > 1 else "ours slower")
        return (
            f"{head} {num(found['ratio'], 3)}× the speed of {other} ({num(found['theirs_ms'], 3)} ms; 95% CI "
            f"{num(low, 3)}–{num(high, 3)} over {found['rounds']} paired rounds) — {verdict}."
        )
    verdict = "faster than" if found["ratio"] > 1 else "slower than"
    return f"{head} {num(found['ratio'])}× the speed of {other} ({num(found['theirs_ms'], 3)} ms) — {verdict} it."


FLOP_CONVENTION = (
    "TFLOP/s follow the leaderboard's convention (`lmperf.measure.attention_flops`): the forward counts "
    "4 · batch · seq² · d FLOPs, halved when causal; the backward "
    f"{num(ATTENTION_PASS_FLOPS['backward'], 1)}× the forward, forward + backward "
    f"{num(ATTENTION_PASS_FLOPS['forward_backward'], 1)}×."
)


def leaderboard(frame: pd.DataFrame) -> list[str]:
    out = ["### Leaderboard shape (batch 16, seq 16384, d 64, bf16, causal)", ""]
    skipped = _skipped(frame, "leaderboard benchmark")
    if skipped:
        return out + [skipped, ""]
    rows = ok(frame)
    first = rows.iloc[0]
    return out + leaderboard_words(frame, rows, first, leaderboard_table(rows))


def leaderboard_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard's rows as the report shows them."""
    return pd.DataFrame(
        {
            "implementation": rows["implementation"],
            "pass": rows["pass"].map(PASS_LABELS),
            "median (ms)": rows["median_ms"].map(lambda x: num(x, 3)),
            **(
                {
                    "95% CI (ms)": [
                        f"{num(lo, 3)}–{num(hi, 3)}" for lo, hi in zip(rows["ci95_low_ms"], rows["ci95_high_ms"])
                    ]
                }
                if "ci95_low_ms" in rows
                else {}
            ),
            "TFLOP/s": rows["tflops"].map(lambda x: num(x, 1)),
            **(
                {
                    "graphed (ms)": rows["graphed_median_ms"].map(lambda x: num(x, 3)),
                    "host-bound": rows["host_bound"].map(lambda x: "yes" if x is True else "no"),
                }
                if gpu_time_column(rows) != "median_ms"
                else {}
            ),
            "max rel. diff. vs sdpa_flash (O, dQ, dK, dV)": rows["rel_diff_vs_sdpa_flash"].map(lambda x: f"{x:.2e}"),
        }
    )


def leaderboard_words(frame: pd.DataFrame, rows: pd.DataFrame, first: pd.Series, shown: pd.DataFrame) -> list[str]:
    """The leaderboard's method, table and comparisons in words."""
    sentences = [
        _ratio_sentence(rows, p, other, column)
        for column in dict.fromkeys(("median_ms", gpu_time_column(rows)))
        for p in ("forward_backward", "forward")
        for other in (*SDPA_BACKENDS, "fa4")
    ]
    sentences.append(
        kernels_sentence(rows[rows["implementation"] == "ours_triton"], "Ours", lambda r: PASS_LABELS[r["pass"]])
    )
    skipped = frame[frame["status"] == "skipped"].drop_duplicates("implementation")
    not_run = [f"{row.implementation} did not run: {text(row.note)}." for row in skipped.itertuples()]
    rounds = (
        f", shared by {int(first['rounds'])} rounds in which the implementations that ran take turns"
        if "rounds" in rows
        else ""
    )
    return [
        f"`triton.testing.do_bench` median, warm-up {first['warmup_ms']} ms, repetitions for {first['rep_ms']} ms"
        f"{rounds}; ours is `torch.compile(FlashAttentionTriton.apply)`, and `o.sum().backward()` for the backward.",
        "",
        FLOP_CONVENTION,
        "",
        table(shown),
        "",
        *[s for s in sentences if s],
        *not_run,
        "",
    ]


SDPA_BACKENDS = ("sdpa_flash", "sdpa_cudnn")
FUSED = ("ours_triton", *SDPA_BACKENDS)  # a few kernel launches per pass, whatever the length


def host_bound_up_to(group: pd.DataFrame) -> int | None:
    """The longest sequence up to which every fused kernel stays within the rows' ``flat_within``
    times its time at the shortest.

    At batch 1 such rows time the host (Python, autograd, kernel launches) more than the kernels.
    """
    within = setting(group, "flat_within")
    limits = []
    for _, rows in group[group["implementation"].isin(FUSED)].sort_values("seq").groupby("implementation"):
        flat = (rows["median_ms"] <= within * rows["median_ms"].iloc[0]).cummin()
        limits.append(int(rows["seq"][flat].max()))
    return min(limits, default=None)


def launched_against_sdpa(group: pd.DataFrame) -> pd.DataFrame:
    """Per sequence length of one (dtype, d), ours launched forward + backward over the faster SDPA
    backend's (the lower launched median of flash and cuDNN at that length), paired round by round
    with a bootstrap CI, and whether it is within the rows' ``launched_within``: 'yes' where the CI's
    top is within it, 'no' where its bottom is above it, else 'not resolved'. Launched at short
    lengths the host sets these times and swings from one stretch of the run to the next, which only
    pairing rounds taken in turns cancels. Empty where the rows were not timed in rounds (older
    sweeps), or lack either side."""
    columns = ["seq", "ours_ms", "faster", "faster_ms", "ratio", "low", "high", "within"]
    rows = group[(group["pass"] == "forward_backward") & (group["status"] == "ok")]
    if "round_ms" not in rows or "launched_within" not in rows:
        return pd.DataFrame(columns=columns)
    rows = rows[rows["round_ms"].notna() & (rows["rounds"] > 1)]  # a single round pairs nothing
    if rows.empty:
        return pd.DataFrame(columns=columns)
    bound = setting(rows, "launched_within")
    out = []
    for seq, at in rows.groupby("seq"):
        by_name = at.set_index("implementation")
        sdpa = by_name[by_name.index.isin(SDPA_BACKENDS)]
        if "ours_triton" not in by_name.index or sdpa.empty:
            continue
        sdpa = sdpa[sdpa["rounds"] == by_name.loc["ours_triton", "rounds"]]  # the rounds pair one to one
        if sdpa.empty:
            continue
        faster = sdpa["median_ms"].idxmin()
        ours_rounds, faster_rounds = (
            split_ms(by_name.loc["ours_triton", "round_ms"]),
            split_ms(sdpa.loc[faster, "round_ms"]),
        )
        ratio, low, high = ratio_ci(ours_rounds, faster_rounds)
        within = "yes" if high <= bound else "no" if low > bound else "not resolved"
        out.append(
            [
                int(seq),
                by_name.loc["ours_triton", "median_ms"],
                faster,
                sdpa.loc[faster, "median_ms"],
                ratio,
                low,
                high,
                within,
            ]
        )
    return pd.DataFrame(out, columns=columns)


def launched_target(group: pd.DataFrame) -> list[str]:
    """``launched_against_sdpa`` as a table and a count, where the rows were timed in rounds: the
    launched target a user meets, stated per length with its CI rather than from one median."""
    found = launched_against_sdpa(group)
    if found.empty:
        return []
    bound = num(setting(group, "launched_within"))
    rounds = int(group.loc[group["implementation"] == "ours_triton", "rounds"].max())
    shown = pd.DataFrame(
        {
            "seq": found["seq"].astype(str),
            "ours (ms)": found["ours_ms"].map(lambda x: num(x, 3)),
            "faster SDPA": found["faster"],
            "its ms": found["faster_ms"].map(lambda x: num(x, 3)),
            "ours / it [95% CI]": [
                f"{num(r.ratio, 3)} [{num(r.low, 3)}, {num(r.high, 3)}]" for r in found.itertuples()
            ],
            f"within {bound}×": found["within"],
        }
    )
    counts = found["within"].value_counts()
    return [
        f"Launched forward + backward, ours against the faster SDPA backend at each length, paired over "
        f"{rounds} interleaved rounds: within {bound}× at {counts.get('yes', 0)} of {len(found)} lengths, "
        f"above it at {counts.get('no', 0)}, not resolved at {counts.get('not resolved', 0)} (the CI holds "
        f"{bound}). Launched, at short lengths, the host sets these times.",
        "",
        table(shown),
        "",
    ]


def memory_growth(ours: pd.DataFrame) -> dict | None:
    """Ours' peak memory at its two longest sequences, how much it grew against the sequence, and
    the growth's shape in sequence length (an N² buffer would grow as the sequence squared)."""
    if len(ours) < 2:
        return None
    last, before = ours.iloc[-1], ours.iloc[-2]
    growth = last["peak_mem_gib"] / before["peak_mem_gib"]
    seq_growth = last["seq"] / before["seq"]
    shape = (
        "at most linear"
        if growth <= 1.05 * seq_growth
        else "between linear and quadratic"
        if growth < 0.75 * seq_growth**2
        else "quadratic"
    )
    return {
        "before_seq": int(before["seq"]),
        "before_gib": before["peak_mem_gib"],
        "last_seq": int(last["seq"]),
        "last_gib": last["peak_mem_gib"],
        "growth": growth,
        "seq_growth": seq_growth,
        "shape": shape,
    }


def _memory_sentence(ours: pd.DataFrame) -> list[str]:
    found = memory_growth(ours)
    if found is None:
        return []
    return [
        f"Peak memory of ours, forward + backward: {num(found['before_gib'], 3)} GiB at seq "
        f"{found['before_seq']} and "
        f"{num(found['last_gib'], 3)} GiB at seq {found['last_seq']}: ×{num(found['growth'])} for "
        f"×{num(found['seq_growth'])} the sequence ({found['shape']} in sequence length; an N² buffer would grow "
        f"×{num(found['seq_growth'] ** 2)}).",
        "",
    ]


def at_longest_sequence(group: pd.DataFrame) -> dict | None:
    """Ours against the fastest other implementation, per pass, at the longest sequence ours ran
    (short sequences time the host; the longest one is where the kernels themselves are compared):
    the sequence, the time column used, and per pass ours' time, the fastest other and its time."""
    ours = group[group["implementation"] == "ours_triton"]
    if ours.empty:
        return None
    column = gpu_time_column(group)
    seq = ours["seq"].max()
    at_seq = group[group["seq"] == seq]
    passes = []
    for pass_, label in PASS_LABELS.items():
        mine = at_seq[(at_seq["implementation"] == "ours_triton") & (at_seq["pass"] == pass_)].dropna(subset=column)
        others = at_seq[(at_seq["implementation"] != "ours_triton") & (at_seq["pass"] == pass_)].dropna(subset=column)
        if mine.empty or others.empty:
            continue
        best = others.loc[others[column].idxmin()]
        passes.append(
            {"label": label, "ms": mine[column].iloc[0], "best": best["implementation"], "best_ms": best[column]}
        )
    return {"seq": int(seq), "column": column, "passes": passes} if passes else None


def longest_sequence_sentence(group: pd.DataFrame) -> list[str]:
    """``at_longest_sequence`` in words."""
    found = at_longest_sequence(group)
    if found is None:
        return []
    parts = [
        f"{p['label']} {num(p['ms'], 3)} ms against {p['best']}'s {num(p['best_ms'], 3)} ms "
        f"({num(p['best_ms'] / p['ms'])}× the speed)"
        for p in found["passes"]
    ]
    how = "" if found["column"] == "median_ms" else " (replayed as CUDA graphs)"
    return [
        f"At seq {found['seq']}, ours_triton against the fastest other implementation{how}: " + "; ".join(parts) + ".",
        "",
    ]


def graphed_counts(group: pd.DataFrame, min_seq: int = 4096) -> dict:
    """How many timed rows the host bounds (at the rows' threshold), and from ``min_seq`` on, at how
    many (pass, seq) points ours is at least as fast as SDPA flash on GPU time, with its lowest
    speed ratio and where (``pairs`` 0 where either did not run there)."""
    timed = group.dropna(subset="graphed_median_ms")
    found = {
        "timed": len(timed),
        "bound": int(timed["host_bound"].astype(bool).sum()),
        "threshold": setting(timed, "host_bound_threshold"),
        "min_seq": min_seq,
        "pairs": 0,
    }
    long = timed[timed["seq"] >= min_seq].pivot_table(
        index=["pass", "seq"], columns="implementation", values="graphed_median_ms"
    )
    if {"ours_triton", "sdpa_flash"} <= set(long.columns):
        pairs = long[["ours_triton", "sdpa_flash"]].dropna()
        ratio = pairs["sdpa_flash"] / pairs["ours_triton"]
        (pass_, seq) = ratio.idxmin()
        found.update(
            pairs=len(pairs),
            wins=int((pairs["ours_triton"] <= pairs["sdpa_flash"]).sum()),
            lowest=ratio.min(),
            lowest_at=(pass_, int(seq)),
        )
    return found


def graphed_sentences(group: pd.DataFrame, min_seq: int = 4096) -> list[str]:
    """``graphed_counts`` in words."""
    found = graphed_counts(group, min_seq)
    out = [
        f"{found['bound']} of {found['timed']} graphed rows are host-bound (launched median more than "
        f"{share(found['threshold'])} over the replayed one); their launched times measure Python and kernel "
        "launches, so the comparisons here use the replayed times."
    ]
    if found["pairs"]:
        pass_, seq = found["lowest_at"]
        out.append(
            f"From seq {min_seq} on, ours is at least as fast as sdpa_flash at {found['wins']} of {found['pairs']} "
            f"(pass, seq) points; its lowest speed ratio there is {num(found['lowest'])}× "
            f"({PASS_LABELS[pass_]} at seq {seq})."
        )
    return [" ".join(out), ""]


def sweep(frame: pd.DataFrame) -> list[str]:
    out = ["### Sweep (batch 1, causal)", ""]
    skipped = _skipped(frame, "sweep")
    if skipped:
        return out + [skipped, ""]
    rows = ok(frame)
    for (dtype, d), all_passes in rows.groupby(["dtype", "d"]):
        group = all_passes[all_passes["pass"] == "forward_backward"]
        column = gpu_time_column(group)
        wide = group.pivot_table(index="seq", columns="implementation", values=column).reset_index()
        how = "" if column == "median_ms" else ", replayed as a CUDA graph"
        out += [
            f"**forward + backward (ms{how}), {dtype}, d = {d}**",
            "",
            table(wide.map(lambda x: num(x, 3) if isinstance(x, float) else str(x))),
            "",
        ]
        if column != "median_ms":
            out += graphed_sentences(all_passes)
        flat_to = host_bound_up_to(group)
        if column == "median_ms" and flat_to is not None and flat_to > group["seq"].min():  # else no flat region
            out += [
                f"Up to seq {flat_to} each fused kernel "
                f"({', '.join(sorted(set(FUSED) & set(group['implementation'])))}) "
                f"stays within {setting(group, 'flat_within'):g}× its time at seq {int(group['seq'].min())}: "
                "at batch 1 those rows time the host "
                "(Python, autograd, kernel launches) more than the kernels, which the longer sequences and the "
                "leaderboard shape compare.",
                "",
            ]
        out += launched_target(all_passes)
        out += longest_sequence_sentence(all_passes)
        ours = group[group["implementation"] == "ours_triton"].sort_values("seq")
        ran = kernels_sentence(ours, "ours_triton", lambda r: f"seq {int(r['seq'])}")
        out += [ran, ""] if ran else []
        out += _memory_sentence(ours)
    out += left_out(frame)
    not_run = frame[frame["status"] != "ok"]
    if len(not_run):
        out += [
            f"{len(not_run)} sweep rows did not run: "
            + "; ".join(sorted({f"{r.implementation} {r.dtype}: {r.status}" for r in not_run.itertuples()}))
            + ".",
            "",
        ]
    return out + ["![FlashAttention throughput](figures/flash_tflops.png)", ""]


FULL_GRID_LEAVES_OUT = {"ours_pytorch"}  # the full grid's flash.sweep.implementations, against the study's


def left_out(frame: pd.DataFrame) -> list[str]:
    """The study's implementations that this run's sweep did not time, in words, so that a reader
    does not take an absent implementation for one that lost; none where it timed them all. Where
    what is missing is what the full grid leaves out, the sentence gives the full grid's reason."""
    left = [name for name in grid.FLASH_IMPLEMENTATIONS if name not in set(frame["implementation"])]
    if not left:
        return []
    why = (
        ": the full grid leaves out ours_pytorch, our tiled PyTorch FlashAttention-2, whose loop over tiles in "
        "Python answers no question of speed and is checked against float64 in the tests; `wide.yaml` times it"
        if set(left) == FULL_GRID_LEAVES_OUT
        else ""
    )
    return [f"This run's sweep did not time {', '.join(left)} (not in its `flash.sweep.implementations`{why}).", ""]


PUBLISHED = Path(__file__).parent / "published/flash_attention_3.csv"


def published_anchor(leaderboard_frame: pd.DataFrame, path: Path = PUBLISHED) -> list[str]:
    """FlashAttention-3's own figures on an H100, as its paper reports them, beside ours at the
    leaderboard shape: an anchor for what Hopper attention reaches, stated as published and not
    measured here (same GPU family and tokens; its dtype, head count and batch differ). Nothing where
    the leaderboard did not run."""
    ours = ok(leaderboard_frame)  # a run whose leaderboard did not run has no such columns
    ours = ours[(ours["implementation"] == "ours_triton") & (ours["pass"] == "forward")] if len(ours) else ours
    if ours.empty:
        return []
    paper = pd.read_csv(path)
    first = paper.iloc[0]
    figures = "; ".join(
        f"{'causal' if r.causal else 'non-causal'} {r['pass']} at d {r.d}: {num(r.tflops, 0)} TF/s"
        for _, r in paper.iterrows()
    )
    return [
        f"Published, not measured here: {first['implementation']} ({first['source']}) on an {first['device']}, "
        f"{first['dtype']}, {int(first['tokens'])} tokens and hidden size {int(first['hidden'])}: {figures}. "
        f"Ours at the leaderboard shape, causal forward"
        + (f" at d {int(ours['d'].iloc[0])}" if "d" in ours else "")
        + f": {num(ours['tflops'].iloc[0], 0)} TF/s (the table above).",
        "",
    ]


def render(leaderboard_frame: pd.DataFrame, sweep_frame: pd.DataFrame) -> str:
    return "\n".join(
        [
            "## FlashAttention",
            "",
            *leaderboard(leaderboard_frame),
            *published_anchor(leaderboard_frame),
            *sweep(sweep_frame),
        ]
    )
