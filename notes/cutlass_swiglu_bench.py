"""Is the SwiGLU free in a CUTLASS kernel's epilogue? (notes/ladder-power.md, last section)

Ran at: 19f7bd0e8239 (H100 80GB HBM3), output: notes/logs/2026-11-27-cutlass_swiglu_bench-1.txt

Plain CUTLASS ping-pong kernels are level with cuBLAS on x W1^T (notes/cutlass_gemm_bench.py). Here
CUTLASS's own gated-activation kernel (``cutlass_gemm/gated.cu``, built into
``cutlass_gemm/libcutlass_gated.so``) computes H = SiLU(x W1^T) (x W3^T) in one kernel, from one
stacked weight, and stores H alone. At the 2.7B shapes (4096 tokens, d_model 2560, d_ff 10240,
bf16), 32 layers a CUDA graph:

- ``torch``: G and U by cuBLAS, then inductor's SwiGLU kernel (what the top rung runs);
- ``torch_gemms``: the two cuBLAS products alone (they store G and U);
- ``gated``: the CUTLASS kernel, storing H alone.

If its epilogue is free, ``gated`` costs about ``torch_gemms`` less the difference between storing G
and U (5.4 GB) and storing H (2.7 GB). A fused kernel for training would store all three: about
``torch_gemms`` plus H's 2.7 GB, against ``torch``. First H on layer 0 is checked against float64,
then the arms take turns, each held 3 s and timed about 4 s, with NVML's energy counter.

    PYTHONPATH=src python notes/cutlass_swiglu_bench.py 3
"""

import ctypes
import pathlib
import sys

import torch
from cutlass_gemm_bench import run
from held_energy import captured, in_turns


def main(rounds: int) -> None:
    device = torch.device("cuda")
    tokens, d_model, d_ff, layers = 4096, 2560, 10240, 32
    lib = ctypes.CDLL(str(pathlib.Path(__file__).parent / "cutlass_gemm" / "libcutlass_gated.so"))
    gated_mm = lib.gated_pingpong_128x128_1x2
    gated_mm.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    workspace = torch.empty(64 << 20, device=device, dtype=torch.uint8)

    torch.manual_seed(0)
    x = torch.randn(tokens, d_model, device=device, dtype=torch.bfloat16)
    std = (2 / (d_model + d_ff)) ** 0.5
    w13 = [torch.randn(2 * d_ff, d_model, device=device, dtype=torch.bfloat16) * std for _ in range(layers)]
    g, u, h = (torch.empty(tokens, d_ff, device=device, dtype=torch.bfloat16) for _ in range(3))
    gate = torch.compile(lambda g, u: g * torch.sigmoid(g) * u)

    def gated(w):
        run(gated_mm, workspace, w.data_ptr(), x.data_ptr(), h.data_ptr(), 2 * d_ff, tokens, d_model)

    def products(w):
        torch.mm(x, w[:d_ff].t(), out=g)
        torch.mm(x, w[d_ff:].t(), out=u)

    # which half of [W1; W3] the kernel takes as the gate: checked, not assumed
    first, second = (x.double() @ w.t() for w in w13[0].double().split(d_ff))
    h.zero_()
    gated(w13[0])
    torch.cuda.synchronize()
    for name, (gate_half, up_half) in {"first": (first, second), "second": (second, first)}.items():
        reference = gate_half * torch.sigmoid(gate_half) * up_half
        error = ((h.double() - reference).abs().max() / reference.abs().max()).item()
        print(f"# gated, the {name} half as the gate: largest error / largest value against float64 {error:.1e}")
    products(w13[0])
    reference = first * torch.sigmoid(first) * second
    error = ((gate(g, u).double() - reference).abs().max() / reference.abs().max()).item()
    print(f"# torch: largest error / largest value against float64 {error:.1e}", flush=True)

    def every_layer(step):  # a CUDA graph of step for each layer's weight
        return captured(lambda: [step(w) for w in w13], "thread_local")

    arms = {
        "torch": every_layer(lambda w: (products(w), gate(g, u))),
        "torch_gemms": every_layer(products),
        "gated": every_layer(gated),
    }
    flops = 2 * 2 * tokens * d_model * d_ff * layers
    print(f"# {torch.cuda.get_device_name(device)}, {layers} layers a replay", flush=True)
    print("round arm replays median_ms tflops j_per_replay", flush=True)
    in_turns(arms, device, rounds, 3.0, 4.0, flops)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
