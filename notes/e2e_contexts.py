"""Do e2e's middle contexts (256, 512) repeat the answer of its ends (128, 1024), so that they could go?

Reads the committed e2e grid at one commit (``report/reference/h100/e2e-one-commit/e2e.csv``, one
H100) and, for each comparison the report draws from e2e rows in the full grid (bf16 against fp32,
compiled against eager, one attention against another) and each size and mode, prints the ratio of
the two step times at every context; a middle context "lies between the ends" where its ratio is
within 1% of the range of the ratios at 128 and 1024. Launched (``median_ms``) and replayed as a
CUDA graph (``graphed_median_ms``). CPU only.

    python notes/e2e_contexts.py

Ran at: 6cf6d91 (this CPU), output: logs/2026-11-30-e2e_contexts-6cf6d91-cpu.txt
"""

from pathlib import Path

import pandas as pd

ROWS = Path(__file__).resolve().parents[1] / "report/reference/h100/e2e-one-commit/e2e.csv"
ENDS, MIDDLE = (128, 1024), (256, 512)
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


def ratios(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per comparison, size and mode; one column per context: the ratio of the step times."""
    times = rows.set_index(["precision", "compile", "attention", "size", "mode", "context_length"])[column].sort_index()
    out = []
    for name, (step, other) in COMPARISONS.items():
        ratio = (times.loc[step] / times.loc[other]).dropna().unstack("context_length")
        out.append(ratio.assign(comparison=name).set_index("comparison", append=True))
    return pd.concat(out).reorder_levels(["comparison", "size", "mode"])


def main() -> None:
    rows = pd.read_csv(ROWS)
    rows = rows[rows["status"] == "ok"]
    for timing, column in (("replayed", "graphed_median_ms"), ("launched", "median_ms")):
        table = ratios(rows, column).dropna(subset=list(ENDS))
        low, high = table[list(ENDS)].min(axis=1), table[list(ENDS)].max(axis=1)
        between = {ctx: table[ctx].between(0.99 * low, 1.01 * high) for ctx in MIDDLE}
        counted = sum(int(table[ctx].notna().sum()) for ctx in MIDDLE)
        inside = sum(int((between[ctx] & table[ctx].notna()).sum()) for ctx in MIDDLE)
        print(f"## {timing} ({column})\n")
        print(table.round(3).to_string())
        print(f"\n{inside} of {counted} middle-context ratios lie between the ends' (within 1%). Outside:")
        for name, group in table.groupby(level="comparison", sort=False):
            outside = sum(int((~between[ctx][group.index] & group[ctx].notna()).sum()) for ctx in MIDDLE)
            print(f"  {name}: {outside} of {int(group[list(MIDDLE)].notna().sum().sum())}")
        print()


if __name__ == "__main__":
    main()
