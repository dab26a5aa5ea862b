# pinned: 3cab90bebebc  (uses lmperf internals; run it from a checkout of that commit)
# internals: kernel modules made from flash_gluon_backward's source, and their _launch
"""Variant 21 against variant 20 and SDPA cuDNN at the leaderboard shape (16 x 1 x 16384 x 64,
causal), at the power cap: the backward alone, then forward + backward as the leaderboard times it
(`o.sum().backward()`, our Gluon forward before each of our backwards).

Ran at: 3cab90bebebc (H100 80GB HBM3), output: notes/flash_hopper/logs/2026-11-26-ab_dq_turns-3cab90b.txt

- v20: the five-product backward as b4151c7 landed it (13cb580 has the same kernel); each
  warpgroup's dQ share went through shared memory, the second warpgroup added the first's and the
  TMA unit added the sum.
- v21: this tree's kernel; the warpgroups take turns, one computing the whole dQ tile of a step over
  both warpgroups' keys (dS^T of both in shared memory), so no fp32 share crosses shared memory.
- v21s3: v21 with a ring of three Q/dO slots instead of two.

Each arm's gradients are compared with cuDNN's first. Then interleaved rounds of
`do_bench(rep=REP ms)`, each after a 2 s hold, with nvidia-smi sampling the SM clock and power.

    PYTHONPATH=src python notes/flash_hopper/ab_dq_turns.py V20_SOURCE [REP_MS] [ROUNDS]

V20_SOURCE is `git show 13cb580:src/lmperf/attention/flash_gluon_backward.py` saved to a file.
Exit status 0 when v21's forward + backward median is below v20's, 3 otherwise.
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, "notes/flash_hopper")
import torch
import torch.nn.functional as F
from common import kernel_module, leaderboard_backward_inputs
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from lmperf.attention import flash_gluon_backward as landed
from lmperf.attention import flash_triton
from lmperf.measure.power import hold, nvidia_smi_id, sampled

V20_SOURCE = Path(sys.argv[1]).read_text()
REP = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
src = Path(landed.__file__).read_text()
kernels = {
    "v20": kernel_module(V20_SOURCE, "bwd_v20"),
    "v21": landed,
    "v21s3": kernel_module(src, "bwd_v21s3", ("STAGES = gl.constexpr(2)", "STAGES = gl.constexpr(3)")),
}

q, k, v, o, L, do = leaderboard_backward_inputs()
x = [t.detach().clone().requires_grad_() for t in (q, k, v)]
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    oc = F.scaled_dot_product_attention(*x, is_causal=True)
ref = torch.autograd.grad(oc, x, do, retain_graph=True)

backward = {"cudnn": lambda: torch.autograd.grad(oc, x, do, retain_graph=True)}
for name, mod in kernels.items():
    grads = [torch.empty_like(t) for t in (q, k, v)]
    mod._launch(q, k, v, o, do, L, *grads, True)
    torch.cuda.synchronize()
    rel = max((a.float() - b.float()).abs().max().item() / b.float().abs().max().item() for a, b in zip(grads, ref))
    print(f"{name}: max rel diff vs cudnn {rel:.2e}", flush=True)
    backward[name] = lambda mod=mod, grads=grads: mod._launch(q, k, v, o, do, L, *grads, True)


def leaderboard(mod):
    """Forward + backward as the flash study's leaderboard times it, through our autograd function
    with `mod` as its Hopper backward (cuDNN through SDPA when mod is None)."""

    def run():
        for t in x:
            t.grad = None
        if mod is None:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(*x, is_causal=True).sum().backward()
        else:
            flash_triton.flash_gluon_backward = mod
            flash_triton.FlashAttentionTriton.apply(*x, True).sum().backward()

    return run


forward_backward = {"cudnn": leaderboard(None)} | {name: leaderboard(mod) for name, mod in kernels.items()}
device = torch.device("cuda")
medians = {}
for label, arms in (("backward", backward), ("fwd+bwd", forward_backward)):
    times = {name: [] for name in arms}
    for r in range(ROUNDS):
        for name, run in arms.items():
            hold(run, device, seconds=2)
            with sampled(nvidia_smi_id(device)) as gpu:
                times[name].append(do_bench(run, warmup=50, rep=REP, return_mode="median"))
            c = gpu.columns("")
            print(
                f"{label} round {r} {name:>6} {times[name][-1]:.4f} ms  SM {c['sm_clock_mhz']:.0f} MHz  "
                f"{c['power_w']:.0f} W  {c['temperature_c']:.0f} C  reasons {c['clock_event_reasons']}",
                flush=True,
            )
    medians[label] = {name: statistics.median(xs) for name, xs in times.items()}
    for name, xs in times.items():
        wins = sum(a < b for a, b in zip(xs, times["cudnn"]))
        print(
            f"{label} {name:>6} median {statistics.median(xs):.4f} ms, "
            f"x{statistics.median(times['cudnn']) / statistics.median(xs):.3f} of cudnn's speed, "
            f"faster than cudnn in {wins}/{ROUNDS} {[round(t, 4) for t in xs]}",
            flush=True,
        )
flash_triton.flash_gluon_backward = landed
sys.exit(0 if medians["fwd+bwd"]["v21"] < medians["fwd+bwd"]["v20"] else 3)  # 0: this tree's kernel is faster
