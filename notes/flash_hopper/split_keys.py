# pinned: abb29c09cc9c  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_gluon._sm_count
"""Split-KV for grids that leave SMs idle: the Gluon forward with and without it, against SDPA's
flash and cuDNN backends, at batch 1 (the sweep's shape), replayed as CUDA graphs, interleaved.

Ran at: abb29c09cc9c (H100 80GB HBM3), output: the table of notes/flash-hopper.md, "Split keys for grids
    that leave SMs idle" (not kept as a file)

    PYTHONPATH=src python notes/flash_hopper/split_keys.py
"""

import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench_cudagraph

from lmperf.attention import flash_gluon

auto_splits = flash_gluon.key_splits


def gluon(splits):
    def run(q, k, v, o, L):
        flash_gluon.key_splits = auto_splits if splits == "auto" else (lambda *a: 1)
        flash_gluon.forward(q, k, v, o, L, True)

    return run


def sdpa(backend):
    def run(q, k, v, o, L):
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return run


CANDIDATES = {
    "gluon, no split": gluon(1),
    "gluon, split": gluon("auto"),
    "sdpa flash": sdpa(SDPBackend.FLASH_ATTENTION),
    "sdpa cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
}

for d in (64, 128):
    for n in (2048, 4096, 8192, 16384):
        q, k, v = (torch.randn(1, 1, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, L = torch.empty_like(q), torch.empty(1, 1, n, device="cuda")
        times = {name: [] for name in CANDIDATES}
        for _ in range(5):  # rounds, A B C D each
            for name, run in CANDIDATES.items():
                times[name].append(do_bench_cudagraph(lambda: run(q, k, v, o, L), rep=50) * 1e3)
        splits = auto_splits(
            n // flash_gluon.BLOCK_M, n // flash_gluon.tiling(n, d)[0], flash_gluon._sm_count(q.device)
        )
        cells = "  ".join(f"{name} {statistics.median(t):6.1f}" for name, t in times.items())
        print(f"d={d:3d} seq={n:5d} splits={splits}  (us)  {cells}", flush=True)
