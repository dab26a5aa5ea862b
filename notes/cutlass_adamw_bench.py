"""Does AdamW cost less inside the weight-gradient GEMMs' epilogue? (notes/ladder-power.md)

Ran at: 4b917eb98b3e (H100 80GB HBM3, two runs), outputs: notes/logs/2026-11-27-cutlass_adamw_bench-1.txt and -2.txt

The backward writes each weight gradient in bf16 and AdamW reads it back: 4 bytes a parameter,
about 2.5 J a 2.7B step at the copy's energy per byte. ``cutlass_gemm/adamw.cu`` (built into
``cutlass_gemm/libcutlass_adamw.so``, beside ``libcutlass_gemm.so``) updates the fp32 master weight
and moments in the GEMM's epilogue instead, from the fp32 accumulator, and stores the bf16 weight.
At the 2.7B shapes (4096 tokens; per layer Wq, Wk, Wv, Wo 2560 x 2560, W1, W3 10240 x 2560, W2
2560 x 10240; 32 layers, each with its own weights and state; one dY and X per shape), each arm a
CUDA graph of all 224 weight gradients:

- ``torch``: cuBLAS writes the bf16 gradients, then lmperf's Triton AdamW (one list launch): the
  top rung's path;
- ``torch_gemms`` and ``adamw``: its two halves alone;
- ``cutlass_<kernel>``: CUTLASS's plain product into the bf16 gradients (gemm.cu's twin, same tile);
- ``fused_<kernel>``: the product with AdamW in its epilogue, its state moved between global memory
  and registers directly, with CUTLASS's epilogue subtiles or subtiles half as wide (``_epi16``,
  which do not spill registers), or by TMA through shared memory (``_tma``).

The lever is ``torch - fused``; the epilogue's cost over a free one is ``fused - cutlass -
adamw`` plus the gradient's 4 bytes. First layer 0's seven updates are checked against float64
(from nonzero moments), for the fused kernels and for the torch path; then the arms take turns, each
held 3 s and timed about 4 s, with NVML's energy counter.

    PYTHONPATH=src python notes/cutlass_adamw_bench.py 3 [pingpong_128x128_1x2_tma,...]
"""

import ctypes
import pathlib
import sys

import torch
from cutlass_gemm_bench import load, run
from held_energy import captured, in_turns

from lmperf.kernels.fused_adamw import FusedAdamW

# adamw.cu's kernels: gemm.cu's nt kernel of the same tile (its plain twin), then how the state moves
FUSED = tuple(
    f"{tile}{state}"
    for tile in ("pingpong_128x128_1x2", "cooperative_128x256_2x1_streamk")
    for state in ("", "_epi16", "_tma")
    if not (tile.startswith("cooperative") and state == "_tma")
)


def plain_twin(fused: str) -> str:
    return fused.removesuffix("_epi16").removesuffix("_tma")


TOKENS, D_MODEL, D_FF, LAYERS = 4096, 2560, 10240, 32
LAYER = [(D_MODEL, D_MODEL)] * 4 + [(D_FF, D_MODEL)] * 2 + [(D_MODEL, D_FF)]  # (out, in) of each weight
HYPER = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


class Hyper(ctypes.Structure):
    """adamw.cu's Hyper: the step's constants, with the bias correction folded into step_size."""

    _fields_ = [(name, ctypes.c_float) for name in ("beta1", "beta2", "step_size", "eps", "decay")]

    @classmethod
    def at(cls, t: int) -> "Hyper":
        (beta1, beta2), lr = HYPER["betas"], HYPER["lr"]
        step_size = lr * (1 - beta2**t) ** 0.5 / (1 - beta1**t)
        return cls(beta1, beta2, step_size, HYPER["eps"], 1 - lr * HYPER["weight_decay"])


def reference(dy, x, master, m, v, hyper: Hyper):
    """One update in float64, from the float64 gradient: master, m, v after it."""
    g = dy.double().t() @ x.double()
    m = hyper.beta1 * m.double() + (1 - hyper.beta1) * g
    v = hyper.beta2 * v.double() + (1 - hyper.beta2) * g * g
    p = (master.double() - hyper.step_size * m / (v.sqrt() + hyper.eps)) * hyper.decay
    return p, m, v


def main(rounds: int, fused_kernels: list[str]) -> None:
    device = torch.device("cuda")
    folder = pathlib.Path(__file__).parent / "cutlass_gemm"
    gemm_lib, adamw_lib = load(), ctypes.CDLL(str(folder / "libcutlass_adamw.so"))
    for name in fused_kernels:
        fn = getattr(adamw_lib, f"adamw_{name}")
        fn.argtypes = (
            [ctypes.c_void_p] * 6
            + [ctypes.c_int] * 3
            + [ctypes.POINTER(Hyper), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        )
    workspace = torch.empty(64 << 20, device=device, dtype=torch.uint8)

    torch.manual_seed(0)
    dy = {n: torch.randn(TOKENS, n, device=device, dtype=torch.bfloat16) * 1e-2 for n in (D_MODEL, D_FF)}
    x = {n: torch.randn(TOKENS, n, device=device, dtype=torch.bfloat16) for n in (D_MODEL, D_FF)}
    params = []
    for _ in range(LAYERS):
        for out, inp in LAYER:
            p = torch.nn.Parameter(torch.randn(out, inp, device=device, dtype=torch.bfloat16) * 0.02)
            p.grad = torch.empty_like(p)
            params.append(p)
    optimizer = FusedAdamW(params, **HYPER)
    state = optimizer.state

    def cublas(p):
        out, inp = p.shape
        torch.mm(dy[out].t(), x[inp], out=p.grad)

    def cutlass(name):
        fn = getattr(gemm_lib, f"nt_{name}")
        return lambda p: run(
            fn, workspace, dy[p.shape[0]].data_ptr(), x[p.shape[1]].data_ptr(), p.grad.data_ptr(), *p.shape, TOKENS
        )

    def fused(name, hyper):
        fn = getattr(adamw_lib, f"adamw_{name}")

        def update(p):
            s = state[p]
            pointers = (dy[p.shape[0]], x[p.shape[1]], p, s["master"], s["m"], s["v"])
            run(fn, workspace, *(t.data_ptr() for t in pointers), *p.shape, TOKENS, ctypes.byref(hyper))

        return update

    for p in params:  # the state, made by a first step
        cublas(p)
    optimizer.step()
    for p in params[: len(LAYER)]:  # nonzero moments for the check
        state[p]["m"].normal_(0, 1e-3)
        state[p]["v"].uniform_(1e-8, 1e-6)

    t = int(state[params[0]]["t"].item()) + 1
    hyper = Hyper.at(t)
    layer0 = params[: len(LAYER)]
    before = [(s["master"].clone(), s["m"].clone(), s["v"].clone()) for s in (state[p] for p in layer0)]

    def check(label, update):
        errors = []
        for p, (master, m, v) in zip(layer0, before):
            s = state[p]
            s["master"].copy_(master), s["m"].copy_(m), s["v"].copy_(v), s["t"].fill_(t - 1)
            update(p)
            torch.cuda.synchronize()
            ref_p, ref_m, ref_v = reference(dy[p.shape[0]], x[p.shape[1]], master, m, v, hyper)
            step = (ref_p - master.double()).abs().max()
            errors.append(
                (
                    ((s["master"].double() - ref_p).abs().max() / step).item(),
                    ((s["m"].double() - ref_m).abs().max() / ref_m.abs().max()).item(),
                    ((s["v"].double() - ref_v).abs().max() / ref_v.abs().max()).item(),
                    ((p.detach().double() - ref_p).abs().max() / ref_p.abs().max()).item(),
                )
            )
        worst = [max(column) for column in zip(*errors)]
        print(
            f"# {label}, layer 0 against float64: master {worst[0]:.1e} of the largest step, "
            f"m {worst[1]:.1e}, v {worst[2]:.1e}, bf16 weight {worst[3]:.1e} of the largest value",
            flush=True,
        )

    check(
        "torch (cuBLAS bf16 gradient, Triton AdamW)",
        lambda p: (cublas(p), optimizer.update([p], optimizer.param_groups[0])),
    )
    for name in fused_kernels:
        check(f"fused_{name}", fused(name, hyper))

    def every_weight(step):
        return captured(lambda: [step(p) for p in params], "thread_local")

    arms = {
        "torch": captured(lambda: ([cublas(p) for p in params], optimizer.step()), "thread_local"),
        "torch_gemms": every_weight(cublas),
        "adamw": captured(optimizer.step, "thread_local"),
    }
    for name in dict.fromkeys(map(plain_twin, fused_kernels)):
        arms[f"cutlass_{name}"] = every_weight(cutlass(name))
    for name in fused_kernels:
        arms[f"fused_{name}"] = every_weight(fused(name, hyper))
    flops = 2 * TOKENS * sum(out * inp for out, inp in LAYER) * LAYERS
    print(f"# {torch.cuda.get_device_name(device)}, {len(params)} weight gradients a replay", flush=True)
    print("round arm replays median_ms tflops j_per_replay", flush=True)
    in_turns(arms, device, rounds, 3.0, 4.0, flops)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2].split(",") if len(sys.argv) > 2 else list(FUSED))
