"""What does e2e's restore of broken weights cost at 2.7B, drawn again each time or kept from the first?

e2e's variants share one model; where a variant's steps turn the weights non-finite, the harness
copies the initial weights back (``run_benchmark``'s ``restore``). This builds the 2.7B model on the
GPU as e2e does, then times the two ways of getting its weights back, in turns: drawing them again
from the seed on the CPU and copying them in (what every restore did before), and copying them in
from the state kept after the first draw (what every restore after the first does now). Each time
ends with a CUDA synchronization.

    python notes/e2e_restore.py [SIZE] [REPEATS]

Ran at: d4346d8 (one NVIDIA H200, before the script printed the GPU's UUID; the machine of
report/reference/one-allocation/head-d4346d8/), output: logs/2026-11-30-e2e_restore-d4346d8-h200.txt
"""

import sys
import time

import torch

from lmperf.training import build_model


def seconds(work) -> float:
    start = time.perf_counter()
    work()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main(size: str, repeats: int) -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    model = build_model(size, 1024, cuda)
    kept = {}
    first = seconds(lambda: kept.update(build_model(size, 1024, cpu).state_dict()))
    gpu = torch.cuda.get_device_properties(cuda)
    print(f"{gpu.name} (GPU-{gpu.uuid}) | {size} | {sum(t.numel() for t in kept.values()):,} values")
    print(f"the first draw on the CPU, kept: {first:.2f} s")
    print("turn | drawn again and copied (s) | copied from the kept state (s)")
    for turn in range(repeats):
        drawn = seconds(lambda: model.load_state_dict(build_model(size, 1024, cpu).state_dict()))
        copied = seconds(lambda: model.load_state_dict(kept))
        print(f"{turn} | {drawn:.2f} | {copied:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "2.7B", int(sys.argv[2]) if len(sys.argv) > 2 else 3)
