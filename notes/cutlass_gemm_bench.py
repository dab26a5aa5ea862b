"""Does a CUTLASS Hopper GEMM spend as little energy as cuBLAS's on the 2.7B model's products?

Ran at: e3fab08169d9 (H100 80GB HBM3, three runs, the first with the script's first version), outputs:
    notes/logs/2026-11-27-cutlass_gemm_bench-1.txt, -2.txt and -3.txt

The levers left for the 50% MFU target put work into a GEMM's epilogue: the SwiGLU, or AdamW in the
weight-gradient products (notes/ladder-power.md, last section). They pay only if the GEMM that
carries them costs no more energy than cuBLAS's at the 700 W cap. A Gluon kernel trailed cuBLAS by
2-5% before any epilogue (notes/swiglu_gemm_bench.py). This asks the same of CUTLASS 3's
warp-specialized kernels with clusters of two CTAs, built from ``cutlass_gemm/gemm.cu`` (its header
says how) into ``cutlass_gemm/libcutlass_gemm.so``, which must sit beside this file.

The products, at 4096 tokens, each layer with its own operands, 32 layers a CUDA graph:
- ``ffn_in``: x W1^T (and x W3^T), the forward that would carry the SwiGLU;
- ``ffn_out``: H W2^T, the forward into the residual;
- ``dh``: dY W2, the input gradient that would carry the SwiGLU's backward;
- ``wgrad_in``, ``wgrad_out``: dG^T x and dY^T H, the weight gradients that would carry AdamW.

For each, cuBLAS (torch.mm) against the CUTLASS kernels of its layout: first each one's product on
layer 0 against float64, then each timed alone (do_bench), then cuBLAS and the two fastest kernels
take turns, each held 3 s and timed about 3 s, with NVML's energy counter read around it.

    PYTHONPATH=src python notes/cutlass_gemm_bench.py 3 [ffn_in,dh,...]
"""

import ctypes
import pathlib
import sys

import torch
import triton
from held_energy import captured, in_turns

KERNELS = ("cooperative_128x256_2x1", "cooperative_128x256_1x2", "pingpong_128x128_1x2", "pingpong_128x128_2x1")
# tried for the weight gradients only, where the four above trail cuBLAS (gemm.cu says what they are)
MORE = {
    "nt": (
        "cooperative_256x128_2x1",
        "cooperative_256x128_1x2",
        "cooperative_128x256_2x1_streamk",
        "cooperative_256x128_1x2_streamk",
    )
}
# name: (layout, M, N, K). Stored operands: tn a (M, K), b (N, K); nn a (M, K), b (K, N); nt a (K, M), b (K, N)
SHAPES = {
    "ffn_in": ("tn", 4096, 10240, 2560),
    "ffn_out": ("tn", 4096, 2560, 10240),
    "dh": ("nn", 4096, 10240, 2560),
    "wgrad_in": ("nt", 10240, 2560, 4096),
    "wgrad_out": ("nt", 2560, 10240, 4096),
}
STORED = {
    "tn": lambda m, n, k: ((m, k), (n, k)),
    "nn": lambda m, n, k: ((m, k), (k, n)),
    "nt": lambda m, n, k: ((k, m), (k, n)),
}
AS_PRODUCT = {"tn": lambda a, b: (a, b.t()), "nn": lambda a, b: (a, b), "nt": lambda a, b: (a.t(), b)}
LAYERS = 32


def kernels(layout: str) -> list[str]:
    return [f"{layout}_{name}" for name in KERNELS + MORE.get(layout, ())]


def load():
    lib = ctypes.CDLL(str(pathlib.Path(__file__).parent / "cutlass_gemm" / "libcutlass_gemm.so"))
    for layout in STORED:
        for name in kernels(layout):
            fn = getattr(lib, name)
            fn.argtypes = (
                [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            )
            fn.restype = ctypes.c_int
    return lib


def run(entry, workspace: torch.Tensor, *arguments) -> None:
    """One of the CUTLASS libraries' entry points on the current stream, given its arguments before
    the workspace: every entry point ends with the workspace, its size and the stream, and returns
    launch.hpp's code (0, or the step that failed)."""
    status = entry(*arguments, workspace.data_ptr(), workspace.numel(), torch.cuda.current_stream().cuda_stream)
    if status:
        raise RuntimeError(f"{entry.__name__}: CUTLASS failed at step {status}")


def main(rounds: int, shapes: list[str]) -> None:
    device = torch.device("cuda")
    lib = load()
    workspace = torch.empty(64 << 20, device=device, dtype=torch.uint8)

    def cutlass_mm(name, a, b, d):
        m, n = d.shape
        run(getattr(lib, name), workspace, a.data_ptr(), b.data_ptr(), d.data_ptr(), m, n, a.numel() // m)

    print(f"# {torch.cuda.get_device_name(device)}, {LAYERS} layers a replay", flush=True)
    for shape in shapes:
        layout, m, n, k = SHAPES[shape]
        torch.manual_seed(0)
        a_shape, b_shape = STORED[layout](m, n, k)
        operands = [
            (
                torch.randn(a_shape, device=device, dtype=torch.bfloat16),
                torch.randn(b_shape, device=device, dtype=torch.bfloat16) / k**0.5,
            )
            for _ in range(LAYERS)
        ]
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        reference = torch.mm(*(t.double() for t in AS_PRODUCT[layout](*operands[0])))
        arms = {"cublas": lambda: [torch.mm(*AS_PRODUCT[layout](a, b), out=d) for a, b in operands]}
        for name in ("cublas", *kernels(layout)):
            d.zero_()
            if name == "cublas":
                torch.mm(*AS_PRODUCT[layout](*operands[0]), out=d)
            else:
                cutlass_mm(name, *operands[0], d)
                arms[name] = lambda name=name: [cutlass_mm(name, a, b, d) for a, b in operands]
            error = ((d.double() - reference).abs().max() / reference.abs().max()).item()
            print(f"# {shape} {name}: largest error / largest value against float64 {error:.1e}", flush=True)
        flops = 2 * m * n * k * LAYERS
        alone = {}
        for name, work in arms.items():
            alone[name] = triton.testing.do_bench(work, rep=300)
            print(f"# {shape} do_bench {name}: {alone[name]:.3f} ms, {flops / alone[name] / 1e9:.0f} TF/s", flush=True)
        fastest = sorted(kernels(layout), key=alone.get)[:2]
        replays = {name: captured(arms[name], "thread_local") for name in ("cublas", *fastest)}
        print(f"# {shape}: layout {layout}, (M, N, K) = {(m, n, k)}", flush=True)
        print("shape round arm replays median_ms tflops j_per_replay", flush=True)
        in_turns(replays, device, rounds, 3.0, 3.0, flops, label=(shape,))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2].split(",") if len(sys.argv) > 2 else list(SHAPES))
