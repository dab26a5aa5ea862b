"""Communication figure: all-reduce bus bandwidth vs tensor size, per backend and world size."""

import argparse

import pandas as pd

from lmperf.report.e2e_analysis import ok
from lmperf.report.style import figure, save


def busbw_vs_size(allreduce: pd.DataFrame, path) -> None:
    rows = ok(allreduce)
    fig, axes = figure()
    ax = axes[0][0]
    for (backend, world), group in rows.groupby(["backend", "world_size"]):
        group = group.sort_values("size_mb")
        ax.plot(group["size_mb"], group["busbw_gbps"], marker="o", label=f"{backend}, {world} ranks")
    ax.set(xscale="log", xlabel="tensor size (MB)", ylabel="bus bandwidth (GB/s)", title="All-reduce, float32")
    if len(rows):
        ax.legend(fontsize=7)
    save(fig, path)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--allreduce", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    busbw_vs_size(pd.read_csv(args.allreduce), args.out)


if __name__ == "__main__":
    main()
