"""The report's "Mixed precision" section: the accumulation demo, from data."""

import pandas as pd

from lmperf.report.markdown import table


def render(accumulation: pd.DataFrame) -> str:
    rows = accumulation
    shown = pd.DataFrame({
        "accumulator": rows["accumulator"],
        "summand": rows["summand"] + rows["summand_cast_to_accumulator"].map({True: " → cast", False: ""}),
        "0.01 as stored": rows["summand_stored"].map(lambda x: f"{x:.10f}"),
        "sum of 1000": rows["result"].map(lambda x: f"{x:.10f}"),
        "|error|": rows["abs_error"].map(lambda x: f"{x:.3e}"),
    })
    fp16 = rows[(rows["accumulator"] == "float16")].iloc[0]
    mixed = rows[(rows["accumulator"] == "float32") & (rows["summand"] == "float16")].iloc[0]
    fp32 = rows[(rows["accumulator"] == "float32") & (rows["summand"] == "float32")].iloc[0]
    n = int(fp32["n_adds"])
    return "\n".join([
        "## Mixed precision",
        "",
        "### Accumulation (1000 additions of 0.01)",
        "",
        table(shown),
        "",
        f"Accumulating in float16 ends at {fp16['result']:.4f}, an error of {fp16['abs_error']:.3g}: once the sum grows, "
        f"the spacing of float16 numbers near it exceeds the summand's low bits and each addition rounds. "
        f"A float32 accumulator of float16 summands errs by {mixed['abs_error']:.3g}, which is "
        f"{n} × the float16 representation error of 0.01 ({n * abs(mixed['summand_stored'] - mixed['summand_value']):.3g}) "
        f"plus float32 rounding; all-float32 errs by {fp32['abs_error']:.3g}. Hence mixed precision keeps "
        "accumulators (matmul sums, reductions, optimizer state) in float32.",
        "",
    ])
