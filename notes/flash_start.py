"""Where does a flash study job's `start` go, 11-17 s a job where other studies' take 4-6 s?

A flash job's `start` phase runs from the job's start to its first phase: the Python process, its
imports, and what ``lmperf.studies.flash.sweep_rows`` does before its first trial pass. This script
does the same steps in the same order, in one fresh process, and prints the seconds each took since
the process began: importing torch, then the study; the fingerprint (CUDA's first call among it);
``implementations()``; ``unavailable()`` for every implementation; the first tensors on the GPU;
and, for comparison, our forward's first call at seq 128 (the first trial pass, compiling).

    python notes/flash_start.py [--dtype bf16] [--head-dim 64]

Ran at: eea8740 plus this script, not yet committed (NVIDIA H200), output: logs/2026-11-30-flash_start-eea8740-h200.txt
"""

import time

BEGUN = time.perf_counter()
MARKS = []


def mark(what: str) -> None:
    MARKS.append((what, time.perf_counter() - BEGUN))


import argparse  # noqa: E402

import torch  # noqa: E402

mark("import torch")
from lmperf import grid  # noqa: E402
from lmperf.measure import fingerprint  # noqa: E402
from lmperf.studies import flash  # noqa: E402

mark("import lmperf.studies.flash")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", choices=list(flash.DTYPES), default="bf16")
    p.add_argument("--head-dim", type=int, default=64)
    args = p.parse_args()
    device = torch.device("cuda")
    torch.cuda.is_available()
    mark("torch.cuda.is_available()")
    fingerprint(device)
    mark("fingerprint (the first CUDA call)")
    impls = flash.implementations()
    mark("implementations()")
    for name in grid.FLASH_IMPLEMENTATIONS:
        flash.unavailable(name, args.dtype)
    mark("unavailable() for each")
    generator = torch.Generator(device=device).manual_seed(128)
    q, k, v = (
        torch.randn(1, 128, args.head_dim, device=device, dtype=flash.DTYPES[args.dtype], generator=generator)
        for _ in range(3)
    )
    torch.cuda.synchronize()
    mark("q, k, v on the GPU")
    impls["ours_triton"](q, k, v, True)
    torch.cuda.synchronize()
    mark("our forward's first call, seq 128")
    impls["ours_triton"](q, k, v, True)
    torch.cuda.synchronize()
    mark("its second call")
    last = 0.0
    for what, at in MARKS:
        print(f"{at:7.2f} s  (+{at - last:6.2f})  {what}")
        last = at


if __name__ == "__main__":
    main()
