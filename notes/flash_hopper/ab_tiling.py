"""The Gluon forward's (key tile, ring stages) at the model's contexts, beside SDPA cuDNN: each
choice forced through `flash_attention_gluon.tiling`, the forward alone and forward + backward captured as CUDA
graphs and replayed by do_bench, once per round, five rounds; medians in microseconds.

Ran at: b7954ad4ea71 (H100 80GB HBM3), output: notes/flash_hopper/logs/2026-11-26-ab_tiling-b7954ad.txt

Why: at batch 4 and 1024 keys cuDNN's forward is 10-14% ahead of ours. Three ring stages of 64-key
tiles take 57 KB of shared memory, so three programs fit an SM; two stages take 41 KB, and the
kernel's 125 registers a thread let four fit.

    PYTHONPATH=src python notes/flash_hopper/ab_tiling.py [batch:heads:seq ...]
"""

import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import model_qkv, passes, rounds, sdpa
from torch.nn.attention import SDPBackend

from lmperf.kernels import flash_attention_gluon
from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.measure.timing import GraphUnavailable, capture_graph

LANDED = flash_attention_gluon.tiling


def ours(key_tile, stages):
    def run(q, k, v):
        flash_attention_gluon.tiling = lambda n, d: (key_tile, stages)
        return FlashAttentionTriton.apply(q, k, v, True)

    return run


ARMS = {"64x3 (landed)": ours(64, 3), "64x2": ours(64, 2), "64x4": ours(64, 4), "128x2": ours(128, 2)}
ARMS["cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)


def main() -> None:
    SHAPES = [tuple(map(int, a.split(":"))) for a in sys.argv[1:]] or [
        (4, 12, 512),
        (4, 20, 512),
        (4, 20, 1024),
        (4, 25, 1024),
        (4, 16, 2048),
    ]
    print(torch.cuda.get_device_name())
    for batch, heads, seq in SHAPES:
        q, k, v = model_qkv(batch, heads, seq, 64)
        reference = ARMS["cudnn"](q, k, v).float()
        steps = {}
        for name, fn in ARMS.items():
            out = fn(q, k, v)
            out.sum().backward()  # compile and autotune outside the capture
            error = (out.float() - reference).abs().max().item()
            for pass_, run in passes(fn, q, k, v).items():
                try:
                    steps[pass_, name] = capture_graph(run, torch.device("cuda"))
                except GraphUnavailable as reason:
                    print(f"{batch}x{heads}x{seq} {name} {pass_}: {reason}", flush=True)
            print(f"{batch}x{heads}x{seq} {name}: max |O - cuDNN| {error:.2e}", flush=True)
        times = {key: statistics.median(xs) * 1e3 for key, xs in rounds(steps).items()}
        for pass_ in ("forward", "forward_backward"):
            row = ", ".join(f"{name} {times[pass_, name]:.1f}" for name in ARMS if (pass_, name) in times)
            print(f"{batch}x{heads}x{seq} {pass_} us: {row}", flush=True)
    flash_attention_gluon.tiling = LANDED


if __name__ == "__main__":
    main()
