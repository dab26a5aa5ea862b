"""The five-product Hopper backward at head size 128, and what the change cost it at 64.

At d = 128 the kernel keeps K and V in shared memory (wgmma reads them there), has the loader warp
stage each query tile's logsumexp and Delta in shared memory, and computes dQ in 64-column parts:
registers then hold dK, dV (128 a thread) and one part of dQ. Two questions, each in one process,
the implementations taking turns round by round (do_bench medians of CUDA-graph replays, five
rounds, microseconds):

1. d = 128, forward + backward of our autograd function with the portable backward and with the
   Hopper one forced, beside SDPA's cuDNN backend, at the flash sweep's batch-1 rows, the
   long-row 8 x 1 x 16384 and the model-like 4 x 16 rows; with the largest relative difference
   of each gradient between the two backwards.
2. d = 64, the backward alone: this tree's kernel against the module before the change (a copy of
   its file, BEFORE), at the leaderboard shape and 4 x 16 x 4096.

Ran at: 6baff3e with this kernel uncommitted (H200), output: notes/flash_hopper/logs/2026-11-28-ab_d128-h200.txt

    PYTHONPATH=src python notes/flash_hopper/ab_d128.py BEFORE.py
"""

import importlib.util
import statistics
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import backward_forced, graphed_forward_backward, leaderboard_backward_inputs, model_qkv, rounds, sdpa
from torch.nn.attention import SDPBackend

from lmperf.kernels import flash_attention_gluon, flash_attention_gluon_backward
from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.measure.timing import capture_graph

RULE = flash_attention_gluon_backward.pays
CUDA = torch.device("cuda")
D128_SHAPES = [(1, 1, 2048), (1, 1, 4096), (1, 1, 8192), (1, 1, 16384), (1, 1, 32768), (1, 1, 65536)]
D128_SHAPES += [(8, 1, 16384), (4, 16, 1024), (4, 16, 2048), (4, 16, 4096)]


def ours(q, k, v):
    return FlashAttentionTriton.apply(q, k, v, True)


def head_128() -> None:
    impls = {"portable": (ours, False), "hopper": (ours, True), "cudnn": (sdpa(SDPBackend.CUDNN_ATTENTION), None)}
    for batch, heads, seq in D128_SHAPES:
        q, k, v = model_qkv(batch, heads, seq, 128)
        grads = {}
        for name in ("portable", "hopper"):
            q.grad = k.grad = v.grad = None
            with backward_forced(name == "hopper"):
                ours(q, k, v).backward(torch.ones(q.shape, device=CUDA, dtype=q.dtype))
            grads[name] = [t.grad.float() for t in (q, k, v)]
        diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads["hopper"], grads["portable"]))
        steps = {name: graphed_forward_backward(fn, q, k, v, hopper) for name, (fn, hopper) in impls.items()}
        us = {name: statistics.median(xs) * 1e3 for name, xs in rounds(steps).items()}
        print(
            f"d128 {batch}x{heads}x{seq} fwd+bwd us: "
            + ", ".join(f"{name} {t:.1f}" for name, t in us.items())
            + f"; hopper/portable {us['hopper'] / us['portable']:.3f}; hopper/cudnn {us['hopper'] / us['cudnn']:.3f}"
            + f"; grads rel diff {diff:.2e}; rule says hopper: {RULE(seq, seq // 128 * batch * heads, 128)}",
            flush=True,
        )


def head_64(before_path: str) -> None:
    spec = importlib.util.spec_from_file_location("backward_before", before_path)
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    q, k, v = model_qkv(4, 16, 4096, 64)
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)
    flash_attention_gluon.forward(q, k, v, o, L, True)
    shapes = {"16x1x16384": leaderboard_backward_inputs(), "4x16x4096": (q, k, v, o, L, torch.randn_like(o))}
    for shape, (q, k, v, o, L, do) in shapes.items():
        dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
        steps = {}
        for name, module in (("before", before), ("after", flash_attention_gluon_backward)):

            def run(module=module):
                module.backward(q, k, v, o, do, L, dq, dk, dv, True)

            run()
            steps[name] = capture_graph(run, CUDA)
        us = {name: statistics.median(xs) * 1e3 for name, xs in rounds(steps).items()}
        print(
            f"d64 {shape} backward us: before {us['before']:.1f}, after {us['after']:.1f}; "
            f"after/before {us['after'] / us['before']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__)
    head_128()
    head_64(sys.argv[1])
