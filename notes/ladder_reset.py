"""How long the ladder's reset to the initial weights takes, from pageable and from pinned host memory.

Every timed block, capture and loss check of a ladder point starts with ``Ladder.reset``: the whole
fp32 state dict copied back from the host (13.6 GB at 2.7B). This builds one ``Ladder`` at a size and
times its reset from each copy in turns (synchronized wall clock), and the one-off cost of pinning.
For notes/one-allocation.md.

Ran at: c7ba3ad9e3a7 (NVIDIA H200), output: logs/2026-11-28-ladder-reset-c7ba3ad-h200.csv

    python notes/ladder_reset.py --size 2.7B --rounds 5 --out reset.csv
"""

import argparse
import statistics
import timeit

import pandas as pd
import torch

from lmperf.measure import time_once
from lmperf.measure.env import fingerprint
from lmperf.studies.ladder import RUNGS, Ladder, host_copy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="2.7B")
    p.add_argument("--context-length", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = torch.device("cuda")
    ladder = Ladder(args.size, args.context_length, 4, device, RUNGS[:1])
    state = ladder.model.state_dict()
    gb = sum(v.numel() * v.element_size() for v in state.values()) / 1e9
    copies, pin_s = {}, {}
    for kind in ("pageable", "pinned"):
        start = timeit.default_timer()
        copies[kind] = host_copy(state, pinned=kind == "pinned")
        pin_s[kind] = timeit.default_timer() - start
    times = {kind: [] for kind in copies}
    for _ in range(args.rounds):
        for kind, initial in copies.items():
            ladder.initial = initial
            times[kind].append(time_once(ladder.reset, device)[0])  # synchronized wall clock
    rows = [
        {
            "size": args.size,
            "host_memory": kind,
            "state_gb": gb,
            "copy_to_host_s": pin_s[kind],
            "reset_median_s": statistics.median(t),
            "reset_min_s": min(t),
            "reset_max_s": max(t),
            "reset_gbps": gb / statistics.median(t),
            "rounds": len(t),
            **fingerprint(device),
        }
        for kind, t in times.items()
    ]
    pd.DataFrame(rows).to_csv(args.out, index=False)
    print(pd.DataFrame(rows)[["size", "host_memory", "state_gb", "copy_to_host_s", "reset_median_s", "reset_gbps"]])


if __name__ == "__main__":
    main()
