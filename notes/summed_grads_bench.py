"""Can the input-gradient sums ride in the GEMMs for free? (notes/ladder-power.md, lever table)

Ran at: f2584d3b5edf (H100 80GB HBM3), output: notes/logs/2026-11-27-summed_grads_bench-f2584d3.txt

In the top rung's backward, each block sums the input gradients of the projections that read one
norm: dX = dQ Wq + dK Wk + dV Wv, and dX = dG W1 + dU W3. Inductor computes each product, then adds
them in one more pass (`triton_poi_fused_add_view_*`, 1.5 ms a step at 2.7B, context 1024).
cuBLAS can accumulate instead: ``out.addmm_(g, w)`` reads out in the GEMM's epilogue (beta = 1).
Arms, at the 2.7B model's shapes (4096 tokens, bf16), each a CUDA graph of 32 layers' worth, in
turns, each held 3 s and then timed about 4 s with NVML's energy counter read around it:

- ``attn_add``: three products, then their sum (what inductor runs now);
- ``attn_addmm``: one product, then two accumulated into it;
- ``ffn_add`` and ``ffn_addmm``: the same for the SwiGLU's two input projections (d_ff 10240).

The two arms of a pair compute the same sum, checked first. If the addmm arm saves about the add's
time and energy, the lever is worth building: a custom op that the compiled backward calls.

    PYTHONPATH=src python notes/summed_grads_bench.py 2
"""

import sys

import torch
from held_energy import captured, in_turns


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    device = torch.device("cuda")
    tokens, d_model, d_ff, layers = 4096, 2560, 10240, 32
    torch.manual_seed(0)

    def operands(width: int, n: int):
        grads = [torch.randn(tokens, width, device=device, dtype=torch.bfloat16) for _ in range(n)]
        weights = [torch.randn(width, d_model, device=device, dtype=torch.bfloat16) / width**0.5 for _ in range(n)]
        return grads, weights

    def added(grads, weights):
        total = torch.mm(grads[0], weights[0])
        for g, w in zip(grads[1:], weights[1:]):
            total = total + torch.mm(g, w)
        return total

    def accumulated(grads, weights):
        total = torch.mm(grads[0], weights[0])
        for g, w in zip(grads[1:], weights[1:]):
            total.addmm_(g, w)
        return total

    pairs = {"attn": operands(d_model, 3), "ffn": operands(d_ff, 2)}
    for name, (grads, weights) in pairs.items():
        a, b = added(grads, weights).float(), accumulated(grads, weights).float()
        print(f"# {name}: relative difference of the two sums {((a - b).norm() / a.norm()).item():.1e}", flush=True)

    arms = {}
    for name, (grads, weights) in pairs.items():
        for kind, fn in (("add", added), ("addmm", accumulated)):
            arms[f"{name}_{kind}"] = captured(lambda fn=fn, g=grads, w=weights: [fn(g, w) for _ in range(layers)])

    print(f"# {torch.cuda.get_device_name(device)}, {layers} layers a replay", flush=True)
    print("round arm replays median_ms j_per_replay", flush=True)
    in_turns(arms, device, rounds, 3.0, 4.0)


if __name__ == "__main__":
    main()
