"""The report's batch-size section: tokens/s, MFU and the host's share of a launched train step against
batch size, and the batch from which launched time comes within the host-bound threshold of graphed.
Run as a module, it draws the section's figure: python -m lmperf.report.batch_section --batch CSV --out PNG.
"""

import pandas as pd

from lmperf.registry import STUDIES
from lmperf.report.markdown import MISSING, drop_empty, num, ok, pct, plural, table
from lmperf.report.style import figure, figure_cli, save, sort_by_size


def host_catches_up(rows: pd.DataFrame) -> dict:
    """Per size: the threshold its rows were measured against, the smallest batch whose host overhead
    is within it (None where none is, or no step was graphed), and the batch that did not fit."""
    found = {}
    for size, group in sort_by_size(rows, ["size", "batch_size"]).groupby("size", sort=False):
        timed = ok(group).dropna(subset=["host_overhead"])
        threshold = float(group["host_bound_threshold"].iloc[0])
        within = timed[timed["host_overhead"] <= threshold]
        failed = group[group["status"] != "ok"]
        found[size] = {
            "threshold": threshold,
            "graphed": len(timed) > 0,
            "from_batch": int(within["batch_size"].iloc[0]) if len(within) else None,
            "largest": int(ok(group)["batch_size"].max()) if len(ok(group)) else None,
            "failed": failed.iloc[0] if len(failed) else None,
        }
    return found


def sentence(size: str, found: dict) -> str:
    """What the rows of one size say, in words."""
    fits = f"up to batch {found['largest']}" if found["largest"] else "at no batch"
    said = f"**{size}** was timed {fits}"
    if found["failed"] is not None:
        reason = str(found["failed"]["note"]).split(" GPU ")[0]  # CUDA's message goes on about the allocator
        said += f"; batch {int(found['failed']['batch_size'])} ended the list ({reason})"
    if not found["graphed"]:
        return f"{said}. No step was replayed as a CUDA graph here, so the host's share is not measured."
    limit = pct(found["threshold"], 0)
    if found["from_batch"] is None:
        return f"{said}. At no batch measured does launched time come within {limit} of graphed."
    return f"{said}. From batch {found['from_batch']} on, launched time comes within {limit} of graphed."


def render(batch: pd.DataFrame) -> str:
    rows = sort_by_size(batch, ["size", "batch_size"])
    first = rows.iloc[0]
    out = [
        f"## {STUDIES['batch'].title}",
        "",
        f"The train step ({first['precision']}, {first['compile']}, {first['attention']} attention) at context "
        f"{int(first['context_length'])}, timed launched (and, on a CUDA device, replayed as a CUDA graph) at each "
        f"batch size until a batch does not fit, on **{first['device_name']}**. Host overhead is launched over "
        "graphed time less 1: the share of a launched step that is the host's.",
        "",
        *(sentence(size, found) for size, found in host_catches_up(rows).items()),
        "",
    ]

    def cell(r, column, show):
        return show(r[column]) if r["status"] == "ok" else r["status"].upper()

    out += [
        table(  # a quantity this run could not measure (graphed time, MFU on a CPU) is left out, not dashed
            drop_empty(
                pd.DataFrame(
                    {
                        "size": rows["size"],
                        "batch": rows["batch_size"],
                        "launched (ms)": [cell(r, "median_ms", num) for _, r in rows.iterrows()],
                        "graphed (ms)": [cell(r, "graphed_median_ms", num) for _, r in rows.iterrows()],
                        "tokens/s launched": [cell(r, "tokens_per_s", lambda x: num(x, 0)) for _, r in rows.iterrows()],
                        "MFU launched": [cell(r, "mfu", pct) for _, r in rows.iterrows()],
                        "MFU graphed": [cell(r, "graphed_mfu", pct) for _, r in rows.iterrows()],
                        "host overhead": [cell(r, "host_overhead", pct) for _, r in rows.iterrows()],
                    }
                ).replace("nan", MISSING)
            )
        ),
        "",
        f"![Host overhead and tokens/s against batch size](figures/batch_host_overhead.png)\n\n"
        f"{plural(len(ok(rows)), 'batch size')} timed.",
        "",
    ]
    return "\n".join(out)


def batch_figure(batch: pd.DataFrame, path) -> None:
    """Tokens/s (launched, and graphed where a step was replayed) and host overhead against batch
    size, one line per model size; the dotted line is the rows' host-bound threshold."""
    rows = sort_by_size(ok(batch), ["size", "batch_size"])
    fig, axes = figure(ncols=2)
    throughput, overhead = axes[0]
    for size, group in rows.groupby("size", sort=False):
        (line,) = throughput.plot(group["batch_size"], group["tokens_per_s"], marker="o", label=f"{size} launched")
        graphed = group["batch_size"] * group["context_length"] / (group["graphed_median_ms"] / 1e3)
        throughput.plot(group["batch_size"], graphed, marker="s", linestyle="--", color=line.get_color())
        overhead.plot(group["batch_size"], 100 * group["host_overhead"], marker="o", color=line.get_color())
    batches = sorted(set(rows["batch_size"]))
    if len(rows):
        throughput.set_yscale("log")
        throughput.legend(fontsize=7)
    for ax in (throughput, overhead) if len(rows) else ():  # batch 1, 2, 4, ... evenly spaced, named as such
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.minorticks_off()
    if rows["host_overhead"].notna().any():
        overhead.axhline(100 * rows["host_bound_threshold"].iloc[0], color="gray", linestyle=":")
    else:  # no step replayed as a CUDA graph: no graphed time to hold the launched one against
        overhead.text(0.5, 0.5, "not measured:\nno CUDA graph", ha="center", va="center", transform=overhead.transAxes)
    throughput.set(xlabel="batch size", ylabel="tokens/s (dashed: graphed)")
    overhead.set(xlabel="batch size", ylabel="host overhead (%)")
    save(fig, path)


if __name__ == "__main__":
    figure_cli(batch_figure, "batch", __doc__)
