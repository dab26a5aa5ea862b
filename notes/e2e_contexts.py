"""Do e2e's middle contexts (256, 512) repeat the answer of its ends (128, 1024), so that they could go?
And its middle sizes (medium, large, xl) that of small and 2.7B (``--across size``)?

Reads the committed e2e grid at one commit (``report/reference/h100/e2e-one-commit/e2e.csv``, one
H100) and, for each comparison the report draws from e2e rows in the full grid (bf16 against fp32,
compiled against eager, one attention against another) and each size and mode (each context and
mode, across sizes), prints the ratio of the two step times at every context (size); a middle one
"lies between the ends" where its ratio is within 1% of the range of the ratios at the ends.
Launched (``median_ms``) and replayed as a CUDA graph (``graphed_median_ms``). Then, for the
attention comparisons, each point's verdict from the two rows' 95% CIs (faster, slower, or not
resolved where they overlap), and the middle points whose verdict is neither end's. CPU only.

    python notes/e2e_contexts.py [--across size]

Ran at: 6cf6d91 (this CPU), output: logs/2026-11-30-e2e_contexts-6cf6d91-cpu.txt (the ratios across contexts)
Ran at: 1aeb671 (this CPU), output: logs/2026-12-01-e2e_contexts-1aeb671-cpu.txt (contexts and sizes, with verdicts)
"""

import argparse
from pathlib import Path

import pandas as pd

ROWS = Path(__file__).resolve().parents[1] / "report/reference/h100/e2e-one-commit/e2e.csv"
AXES = {"context_length": ((128, 1024), (256, 512)), "size": (("small", "2.7B"), ("medium", "large", "xl"))}
# (precision, compile, attention) of the step over that of the step it is compared with
COMPARISONS = {
    "bf16 / fp32, eager naive": (("bf16", "eager", "naive"), ("fp32", "eager", "naive")),
    "compiled / eager, naive": (("bf16", "compiled", "naive"), ("bf16", "eager", "naive")),
    "compiled / eager, sdpa": (("bf16", "compiled", "sdpa"), ("bf16", "eager", "sdpa")),
    "compiled / eager, ours": (("bf16", "compiled", "flash_triton"), ("bf16", "eager", "flash_triton")),
    "sdpa / naive, eager": (("bf16", "eager", "sdpa"), ("bf16", "eager", "naive")),
    "ours / naive, eager": (("bf16", "eager", "flash_triton"), ("bf16", "eager", "naive")),
    "ours / sdpa, eager": (("bf16", "eager", "flash_triton"), ("bf16", "eager", "sdpa")),
    "sdpa / naive, compiled": (("bf16", "compiled", "sdpa"), ("bf16", "compiled", "naive")),
    "ours / naive, compiled": (("bf16", "compiled", "flash_triton"), ("bf16", "compiled", "naive")),
}


def ratios(rows: pd.DataFrame, column: str, across: str = "context_length") -> pd.DataFrame:
    """One row per comparison and point (size or context, and mode); one column per value of ``across``:
    the ratio of the step times."""
    other_axis = "size" if across == "context_length" else "context_length"
    times = rows.set_index(["precision", "compile", "attention", other_axis, "mode", across])[column].sort_index()
    out = []
    for name, (step, other) in COMPARISONS.items():
        ratio = (times.loc[step] / times.loc[other]).dropna().unstack(across)
        out.append(ratio.assign(comparison=name).set_index("comparison", append=True))
    return pd.concat(out).reorder_levels(["comparison", other_axis, "mode"])


def verdicts(rows: pd.DataFrame, prefix: str, across: str) -> pd.DataFrame:
    """For each attention comparison and point, one column per value of ``across``: -1 where the step
    is faster than the one it is compared with (its CI wholly below), 1 where slower, 0 where the CIs
    overlap (not resolved)."""
    other_axis = "size" if across == "context_length" else "context_length"
    cols = [f"{prefix}median_ms", f"{prefix}ci95_low_ms", f"{prefix}ci95_high_ms"]
    times = rows.set_index(["precision", "compile", "attention", other_axis, "mode", across])[cols].sort_index()
    out = []
    for name, (step, other) in COMPARISONS.items():
        if name.split(" /")[0] not in ("sdpa", "ours"):
            continue
        a, b = times.loc[step].align(times.loc[other], join="inner")
        verdict = (a[cols[2]] < b[cols[1]]).astype(int) * -1 + (a[cols[1]] > b[cols[2]]).astype(int)
        verdict = verdict.where(a.notna().all(axis=1) & b.notna().all(axis=1))  # no CI, no verdict
        out.append(verdict.unstack(across).assign(comparison=name).set_index("comparison", append=True))
    return pd.concat(out).reorder_levels(["comparison", other_axis, "mode"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--across", choices=list(AXES), default="context_length")
    across = p.parse_args().across
    ends, middle = AXES[across]
    rows = pd.read_csv(ROWS)
    rows = rows[rows["status"] == "ok"]
    print(f"# across {across}: ends {ends}, middle {middle}\n")
    for timing, column in (("replayed", "graphed_median_ms"), ("launched", "median_ms")):
        table = ratios(rows, column, across).dropna(subset=list(ends))
        low, high = table[list(ends)].min(axis=1), table[list(ends)].max(axis=1)
        between = {ctx: table[ctx].between(0.99 * low, 1.01 * high) for ctx in middle}
        counted = sum(int(table[ctx].notna().sum()) for ctx in middle)
        inside = sum(int((between[ctx] & table[ctx].notna()).sum()) for ctx in middle)
        print(f"## {timing} ({column})\n")
        print(table.round(3).to_string())
        print(f"\n{inside} of {counted} middle ratios lie between the ends' (within 1%). Outside:")
        for name, group in table.groupby(level="comparison", sort=False):
            outside = sum(int((~between[ctx][group.index] & group[ctx].notna()).sum()) for ctx in middle)
            print(f"  {name}: {outside} of {int(group[list(middle)].notna().sum().sum())}")
        print()
        prefix = "graphed_" if timing == "replayed" else ""
        table = verdicts(rows, prefix, across).dropna()
        unlike = [(i, m) for i, row in table.iterrows() for m in middle if row[m] not in {row[e] for e in ends}]
        print(
            f"{timing}, attention comparisons: {len(table) * len(middle) - len(unlike)} of {len(table) * len(middle)}"
        )
        print("middle verdicts (-1 faster, 1 slower, 0 not resolved) are an end's; the others:")
        for (name, point, mode), m in unlike:
            row = table.loc[(name, point, mode)]
            print(f"  {name}, {point}, {mode}, at {m}: {row[m]:.0f} (ends {', '.join(f'{row[e]:.0f}' for e in ends)})")
        print()


if __name__ == "__main__":
    main()
