"""The report's "Mixed precision" section: accumulation, autocast dtypes, normalization statistics."""

import pandas as pd

from lmperf.report.markdown import table


def autocast_lines(autocast: pd.DataFrame) -> list[str]:
    out = ["### What autocast produces (the ToyModel, dtypes read off forward hooks and .grad)", ""]
    ran = autocast[autocast["status"] == "ok"]
    for r in autocast[autocast["status"] != "ok"].itertuples():
        out += [f"{r.autocast_dtype} autocast on {r.device}: {r.status} — {r.note}", ""]
    if ran.empty:
        return out
    wide = ran.pivot_table(index="tensor", columns="autocast_dtype", values="dtype", aggfunc="first", sort=False)
    wide.columns = [f"under {c} autocast ({ran['device'].iloc[0]})" for c in wide.columns]
    out += [table(wide.reset_index()), ""]
    kept = sorted(set(ran[ran["dtype"] == "float32"]["tensor"]))
    out += [
        f"Kept in float32 by autocast here: {', '.join(kept)}. Autocast casts the inputs of matrix products to the "
        "low-precision type but leaves the parameters (the master weights) and their gradients in float32.",
        "",
    ]
    return out


def layernorm_findings(layernorm: pd.DataFrame) -> dict:
    """The normalization experiment's numbers: the activation scales at which fp16 overflows the
    mean of squares (or underflows it to 0, and whether the output survives), and bf16's largest
    relative errors of the statistic and of the output."""
    fp16, bf16 = layernorm[layernorm["dtype"] == "fp16"], layernorm[layernorm["dtype"] == "bf16"]
    overflow = fp16[~fp16["mean_square"].map(lambda x: x == x and abs(x) < float("inf"))]
    underflow = fp16[fp16["mean_square"] == 0]
    return {
        "d": int(layernorm["d"].iloc[0]),
        "overflow_scales": list(overflow["scale"]),
        "underflow_scales": list(underflow["scale"]),
        "underflow_output_finite": bool(underflow["output_finite"].all()),
        "bf16_statistic_error": bf16["mean_square_rel_error"].max() if len(bf16) else None,
        "bf16_output_error": bf16["output_rel_error"].max() if len(bf16) else None,
    }


def layernorm_lines(layernorm: pd.DataFrame) -> list[str]:
    shown = pd.DataFrame(
        {
            "dtype": layernorm["dtype"],
            "activation scale": layernorm["scale"].map(lambda x: f"{x:g}"),
            "mean of squares": layernorm["mean_square"].map(lambda x: f"{x:.4g}"),
            "rel. error of the statistic": layernorm["mean_square_rel_error"].map(lambda x: f"{x:.2e}"),
            "normalized output finite": layernorm["output_finite"].map({True: "yes", False: "no"}),
            "rel. error of the output": layernorm["output_rel_error"].map(lambda x: "—" if x != x else f"{x:.2e}"),
        }
    )
    found = layernorm_findings(layernorm)
    out = [
        "### Why normalization statistics stay in float32",
        "",
        f"The mean of squares of {found['d']} activations, and x / √(mean of squares), "
        "computed in each dtype "
        "(no eps, so the statistic alone decides) against float64:",
        "",
        table(shown),
        "",
    ]
    sentences = []
    if found["overflow_scales"]:
        sentences.append(
            f"fp16 overflows the statistic at activation scale {', '.join(f'{x:g}' for x in found['overflow_scales'])} "
            f"(65504 is its largest value)"
        )
    if found["underflow_scales"]:
        sentences.append(
            f"underflows it to 0 at scale {', '.join(f'{x:g}' for x in found['underflow_scales'])}, where the output "
            f"{'is not finite' if not found['underflow_output_finite'] else 'survives'}"
        )
    if found["bf16_statistic_error"] is not None:
        sentences.append(
            "bf16 keeps fp32's range and stays finite everywhere, but with 8 bits of mantissa its statistic is "
            "off by up to "
            f"{found['bf16_statistic_error']:.1e} and its output by up to {found['bf16_output_error']:.1e}"
        )
    out += [
        "Here " + "; ".join(sentences) + ". Hence norms compute their statistics in float32, as our RMSNorm does.",
        "",
    ]
    return out


def accumulation_findings(rows: pd.DataFrame) -> dict:
    """The accumulation experiment's numbers: how many additions of which value, the sum and error
    of each accumulator, and the share of the mixed case's error that float16's representation of
    the summand explains (n x its representation error)."""
    fp16 = rows[(rows["accumulator"] == "float16")].iloc[0]
    mixed = rows[(rows["accumulator"] == "float32") & (rows["summand"] == "float16")].iloc[0]
    fp32 = rows[(rows["accumulator"] == "float32") & (rows["summand"] == "float32")].iloc[0]
    n = int(fp32["n_adds"])
    return {
        "n": n,
        "value": float(fp32["summand_value"]),
        "fp16_result": fp16["result"],
        "fp16_error": fp16["abs_error"],
        "mixed_error": mixed["abs_error"],
        "representation_error": n * abs(mixed["summand_stored"] - mixed["summand_value"]),
        "fp32_error": fp32["abs_error"],
    }


def accumulation_lines(rows: pd.DataFrame) -> list[str]:
    found = accumulation_findings(rows)
    value = f"{found['value']:g}"
    shown = pd.DataFrame(
        {
            "accumulator": rows["accumulator"],
            "summand": rows["summand"] + rows["summand_cast_to_accumulator"].map({True: " → cast", False: ""}),
            f"{value} as stored": rows["summand_stored"].map(lambda x: f"{x:.10f}"),
            f"sum of {found['n']}": rows["result"].map(lambda x: f"{x:.10f}"),
            "|error|": rows["abs_error"].map(lambda x: f"{x:.3e}"),
        }
    )
    return [
        f"### Accumulation ({found['n']} additions of {value})",
        "",
        table(shown),
        "",
        f"Accumulating in float16 ends at {found['fp16_result']:.4f}, an error of {found['fp16_error']:.3g}: once "
        "the sum grows, "
        f"the spacing of float16 numbers near it exceeds the summand's low bits and each addition rounds. "
        f"A float32 accumulator of float16 summands errs by {found['mixed_error']:.3g}, which is "
        f"{found['n']} × the float16 representation error of {value} "
        f"({found['representation_error']:.3g}) "
        f"plus float32 rounding; all-float32 errs by {found['fp32_error']:.3g}. Hence mixed precision keeps "
        "accumulators (matmul sums, reductions, optimizer state) in float32.",
        "",
    ]


def render(accumulation: pd.DataFrame, autocast: pd.DataFrame, layernorm: pd.DataFrame) -> str:
    return "\n".join(
        [
            "## Mixed precision",
            "",
            *accumulation_lines(accumulation),
            *autocast_lines(autocast),
            *layernorm_lines(layernorm),
            "The whole model in bf16 is timed in the end-to-end section above.",
            "",
        ]
    )
