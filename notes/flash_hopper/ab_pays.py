"""Where the five-product Hopper backward pays after variant 21 (`flash_attention_gluon_backward.pays`): forward +
backward of our autograd function with the portable backward and with the Hopper one forced, beside
SDPA cuDNN, at the model's shapes (batch 4, d 64, 512 to 2048 keys) and at the sweep's batch-1 rows
near the rule's edge. Each is captured as a CUDA graph and replayed by do_bench, once per round,
five rounds; medians in microseconds.

Ran at: 3cab90bebebc (H100 80GB HBM3), output: notes/flash_hopper/logs/2026-11-26-ab_pays-h100-3cab90b.txt
Ran at: 3cab90bebebc (H200), output: notes/flash_hopper/logs/2026-11-26-ab_pays-h200-3cab90b.txt

    PYTHONPATH=src python notes/flash_hopper/ab_pays.py [batch:heads:seq ...]
"""

import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import graphed_forward_backward, model_qkv, rounds, sdpa
from torch.nn.attention import SDPBackend

from lmperf.kernels import flash_attention_gluon_backward
from lmperf.kernels.flash_attention import FlashAttentionTriton

RULE = flash_attention_gluon_backward.pays


def ours(q, k, v):
    return FlashAttentionTriton.apply(q, k, v, True)


# name -> (attention, the backward ours is forced to: True Hopper, False portable, None not ours)
IMPLEMENTATIONS = {"portable": (ours, False), "hopper": (ours, True), "cudnn": (sdpa(SDPBackend.CUDNN_ATTENTION), None)}


def main() -> None:
    SHAPES = [tuple(map(int, a.split(":"))) for a in sys.argv[1:]] or [
        (4, 12, 512),
        (4, 16, 1024),
        (4, 20, 1024),
        (4, 25, 1024),
        (4, 16, 2048),
        (4, 16, 4096),
        (1, 1, 8192),
        (1, 2, 8192),
        (1, 1, 16384),
    ]
    print(torch.cuda.get_device_name())
    for batch, heads, seq in SHAPES:
        q, k, v = model_qkv(batch, heads, seq, 64)
        steps = {name: graphed_forward_backward(fn, q, k, v, hopper) for name, (fn, hopper) in IMPLEMENTATIONS.items()}
        times = {name: statistics.median(xs) * 1e3 for name, xs in rounds(steps).items()}
        rule = RULE(seq, seq // 128 * batch * heads, 64)
        print(
            f"{batch}x{heads}x{seq} fwd+bwd us: "
            + ", ".join(f"{name} {us:.1f}" for name, us in times.items())
            + f"; hopper/portable {times['hopper'] / times['portable']:.3f}; rule says hopper: {rule}",
            flush=True,
        )


if __name__ == "__main__":
    main()
