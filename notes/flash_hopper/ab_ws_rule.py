# pinned: 01221c1f8089  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_gluon._launch
"""A/B of flash_gluon's choice of kernel for long rows: the warp-specialized forward (_fwd_ws_kernel,
as chosen) against _fwd_kernel (warp_specialized() forced False), causal, in one process, 5
interleaved rounds of do_bench medians; O compared between the two. Shapes: the sweep's batch-1 rows
past 8192 keys, where the grid has 128 to 512 programs, and the leaderboard's.

Ran at: c3101e47bad1 (H100 80GB HBM3, this script as at 7dde817d4a72, then b2c796b79368), outputs:
    notes/flash_hopper/logs/2026-11-25-ab_ws_rule-1.txt and -2.txt

    PYTHONPATH=src python notes/flash_hopper/ab_ws_rule.py [B x H x N x D[n],...]   (n: not causal)
"""

import statistics
import sys

sys.path.insert(0, "src")
import torch
from triton.testing import do_bench

from lmperf.attention import flash_gluon

rule = flash_gluon.warp_specialized


def run(q, k, v, ws, causal):
    o, L = torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)

    def f():
        flash_gluon.warp_specialized = rule if ws else (lambda n, s: False)
        flash_gluon._launch(q, k, v, o, L, causal)

    return f, o


print(torch.cuda.get_device_name())
SHAPES = (
    (1, 1, 16384, 64),
    (1, 1, 32768, 64),
    (1, 1, 65536, 64),
    (1, 1, 16384, 128),
    (2, 1, 16384, 64),
    (16, 1, 16384, 64),
)
if len(sys.argv) > 1:  # B x H x N x D[n],...: n for non-causal
    SHAPES = [tuple(map(int, s.rstrip("n").split("x"))) + (not s.endswith("n"),) for s in sys.argv[1].split(",")]
for B, H, N, D, *causal in SHAPES:
    causal = causal[0] if causal else True
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    (fa, oa), (fb, ob) = run(q, k, v, True, causal), run(q, k, v, False, causal)
    fa()
    fb()
    torch.cuda.synchronize()
    diff = (oa.float() - ob.float()).abs().max().item()
    t = {"ws": [], "fwd_kernel": []}
    for _ in range(5):
        for name, f in (("ws", fa), ("fwd_kernel", fb)):
            t[name].append(do_bench(f, warmup=50, rep=200, return_mode="median"))
    a, b = statistics.median(t["ws"]), statistics.median(t["fwd_kernel"])
    wins = sum(x < y for x, y in zip(t["ws"], t["fwd_kernel"]))
    print(
        f"{B}x{H}x{N}x{D} causal={causal}: ws {a:.4f} ms, fwd_kernel {b:.4f} ms, ws/fwd_kernel {a / b:.3f}, "
        f"ws faster in {wins}/5, max |O_ws - O_fwd_kernel| {diff:.1e}",
        [round(x, 4) for x in t["ws"]],
        [round(x, 4) for x in t["fwd_kernel"]],
    )
