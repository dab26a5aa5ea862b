"""Communication figure: all-reduce bus bandwidth vs tensor size, per backend and world size."""

import pandas as pd

from lmperf.log import to_stderr
from lmperf.report.markdown import ok
from lmperf.report.style import figure, figure_cli, save


def busbw_vs_size(allreduce: pd.DataFrame, path) -> None:
    rows = ok(allreduce)
    fig, axes = figure()
    ax = axes[0][0]
    for (backend, world), group in rows.groupby(["backend", "world_size"]):
        group = group.sort_values("bytes")
        ax.plot(group["bytes"], group["busbw_gbps"], marker="o", label=f"{backend}, {world} ranks")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="tensor size (bytes)",
        ylabel="bus bandwidth from the median (GB/s)",
        title="All-reduce, float32",
    )
    if len(rows):
        ax.legend(fontsize=7)
    save(fig, path)


if __name__ == "__main__":
    to_stderr()
    figure_cli(busbw_vs_size, "allreduce", __doc__)
