# pinned: 11e5aff2165a  (uses lmperf internals; run it from a checkout of that commit)
# internals: a kernel module made from flash_gluon_backward's source, and its _launch
"""The Hopper backward alone at 16 x 1 x 16384 x 64, causal: SDPA cuDNN's, ours as landed (two dQ
staging slots, a slot freed one step after its reduction, after `tma.store_wait(0)`), and ours with
four slots (a slot freed two steps after its reduction, after `tma.store_wait(1)`), in interleaved
rounds of `do_bench(rep=REP ms)`, with nvidia-smi sampling the SM clock, board power and temperature
every 100 ms. Before timing, each of ours is compared with cuDNN's gradients.

Ran at: 98f9ca3e8ead (H100 80GB HBM3, a scratch copy holding the four-slot kernel as a file), output:
    notes/flash_hopper/logs/2026-11-25-ab_dq_slots.txt

    PYTHONPATH=src python notes/flash_hopper/ab_dq_slots.py [REP_MS] [ROUNDS]

The four-slot kernel is made here from the landed source by replacing its dQ hand-over (VARIANT
below), in a temporary module without the torch.library registration. That hand-over is variant
20's: the script runs against the source of 98f9ca3 to 13cb580, not after variant 21 (3cab90b).
"""

import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, "notes/flash_hopper")
import torch
import torch.nn.functional as F
from common import kernel_module, leaderboard_backward_inputs
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from lmperf.attention import flash_gluon_backward as fgb2

LANDED = """        stage = dq_smem.index(i % 2)
        if i % 2 == WG:  # first of the two: hand this share to the other warpgroup
            if i > 0:  # free the slot of the last step, whose sum this warpgroup reduced
                tma.store_wait(0)
                mbarrier.arrive(dq_free.index((i - 1) % 2), count=1)
            mbarrier.wait(dq_free.index(i % 2), ((i // 2) & 1) ^ 1)  # starts as if phase 1 had completed
            stage.store(dq * scale)
            mbarrier.arrive(dq_ready.index(i % 2), count=1)
        else:  # second: add the other share, and have the TMA unit add the sum to dQ
            mbarrier.wait(dq_ready.index(i % 2), (i // 2) & 1)
            stage.store(stage.load(acc_layout) + dq * scale)
            fence_async_shared()
            _reduce_add(dq_desc, [bh * N + q0, 0], stage)
"""
VARIANT = """        stage = dq_smem.index(i % 4)
        if i % 2 == WG:  # first of the two: hand this share to the other warpgroup
            mbarrier.wait(dq_free.index(i % 4), ((i // 4) & 1) ^ 1)
            stage.store(dq * scale)
            mbarrier.arrive(dq_ready.index(i % 4), count=1)
        else:  # second: add the other share, and have the TMA unit add the sum to dQ
            mbarrier.wait(dq_ready.index(i % 4), (i // 4) & 1)
            stage.store(stage.load(acc_layout) + dq * scale)
            fence_async_shared()
            _reduce_add(dq_desc, [bh * N + q0, 0], stage)
            if i >= 2:  # this warpgroup's reduction two steps back has read its slot
                tma.store_wait(1)
                mbarrier.arrive(dq_free.index((i - 2) % 4), count=1)
"""


def four_slots():
    return kernel_module(
        Path(fgb2.__file__).read_text(),
        "flash_gluon_backward_four_slots",
        (LANDED, VARIANT),
        ("[2, BLOCK_M, D], dq_desc.layout", "[4, BLOCK_M, D], dq_desc.layout"),
        (
            "dq_ready = gl.allocate_shared_memory(gl.int64, [2, 1]",
            "dq_ready = gl.allocate_shared_memory(gl.int64, [4, 1]",
        ),
        (
            "dq_free = gl.allocate_shared_memory(gl.int64, [2, 1]",
            "dq_free = gl.allocate_shared_memory(gl.int64, [4, 1]",
        ),
        (
            "    for i in gl.static_range(2):\n        mbarrier.init(dq_ready",
            "    for i in gl.static_range(4):\n        mbarrier.init(dq_ready",
        ),
    )


REP = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
q, k, v, o, L, do = leaderboard_backward_inputs()


def ours(mod):
    grads = [torch.empty_like(t) for t in (q, k, v)]
    return grads, (lambda: mod._launch(q, k, v, o, do, L, *grads, True))


x = [t.detach().clone().requires_grad_() for t in (q, k, v)]
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    oc = F.scaled_dot_product_attention(*x, is_causal=True)
ref = torch.autograd.grad(oc, x, do, retain_graph=True)
arms = {"cudnn": lambda: torch.autograd.grad(oc, x, do, retain_graph=True)}
for name, mod in (("slots2", fgb2), ("slots4", four_slots())):
    grads, run = ours(mod)
    run()
    torch.cuda.synchronize()
    rel = max((a.float() - b.float()).abs().max().item() / b.float().abs().max().item() for a, b in zip(grads, ref))
    print(f"{name}: max rel diff vs cudnn {rel:.2e}", flush=True)
    arms[name] = run

smi = subprocess.Popen(
    [
        "nvidia-smi",
        "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
        "--format=csv,noheader,nounits",
        "-lms",
        "100",
    ],
    stdout=subprocess.PIPE,
    text=True,
)
windows, times = [], {name: [] for name in arms}
for r in range(ROUNDS):
    for name, run in arms.items():
        t0 = time.time()
        times[name].append(do_bench(run, warmup=200, rep=REP, return_mode="median"))
        windows.append((name, r, t0, time.time()))
smi.terminate()
samples = []
for line in smi.communicate()[0].splitlines():
    try:
        ts, clock, power, temp = [f.strip() for f in line.split(",")]
        samples.append(
            (datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(clock), float(power), float(temp))
        )
    except ValueError:
        pass
for name, r, t0, t1 in windows:  # nvidia-smi prints local time, as strptime reads it
    inside = [s for s in samples if t0 + 0.5 <= s[0] <= t1]
    clock = statistics.median(s[1] for s in inside) if inside else float("nan")
    power = statistics.median(s[2] for s in inside) if inside else float("nan")
    temp = max(s[3] for s in inside) if inside else float("nan")
    print(
        f"round {r} {name:>7} {times[name][r]:.4f} ms  SM {clock:.0f} MHz  {power:.0f} W  {temp:.0f} C  "
        f"({len(inside)} samples)"
    )
for name, xs in times.items():
    print(f"{name:>7} median {statistics.median(xs):.4f} ms {[round(t, 4) for t in xs]}")
