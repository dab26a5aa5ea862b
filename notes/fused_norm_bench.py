"""Is our fused RMSNorm worth a rung? One compiled Transformer block, forward + backward, replayed.

Ran at: e65fe7b50dbc (H100 80GB HBM3, three runs), output: the table of notes/fused-norms.md (not kept as a file)

Arms take turns, A B C A B C, in one process, each a CUDA graph timed by do_bench (median):
- ``inductor``: the block as the model writes it, compiled (what rung ``in_backward`` runs);
- ``fused``: the same block with ``lmperf.kernels.fused_rmsnorm``: ln1 passes the stream through,
  ln2 takes the residual add;
- ``fused_next``: the block also adds its FFN output into the next block's ln1 (what a model whose
  blocks hand (stream, norm) to each other would run);
and the norm alone, forward + backward: inductor's ``ln(x + r)`` against ``add_rmsnorm``.
Linear weights in bf16 under bf16 autocast, as on the ladder's top rungs. Then one profiled replay
per arm lists its norm kernels.

    PYTHONPATH=src python notes/fused_norm_bench.py 2.7B 1024 3
"""

import sys

import torch
import triton.testing

from lmperf.attention import get_attention
from lmperf.kernels.fused_rmsnorm import add_rmsnorm, rmsnorm
from lmperf.measure import capture_graph
from lmperf.model import model_config
from lmperf.model.transformer import Linear, RotaryEmbedding, TransformerBlock


def main() -> None:
    size, context, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    device, batch = torch.device("cuda"), 4
    cfg = model_config(size, context)
    torch.manual_seed(0)
    rope = RotaryEmbedding(cfg.d_head, context, cfg.rope_theta, device)
    block = TransformerBlock(cfg, rope, get_attention("flash_triton"), device)
    for m in block.modules():
        if isinstance(m, Linear):
            m.weight = torch.nn.Parameter(m.weight.detach().bfloat16())
    next_weight = torch.nn.Parameter(torch.ones(cfg.d_model, device=device))

    class Fused(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.b = block

        def forward(self, x):
            x, h = rmsnorm(x, self.b.ln1.weight)
            x, h = add_rmsnorm(x, self.b.attn(h), self.b.ln2.weight)
            return x + self.b.ffn(h)

    class FusedNext(Fused):
        def forward(self, x, n):
            x, h = add_rmsnorm(x, self.b.attn(n), self.b.ln2.weight)
            return add_rmsnorm(x, self.b.ffn(h), next_weight)

    class Norm(torch.nn.Module):
        def forward(self, x, r):
            return block.ln2(x + r)

    x = torch.randn(batch, context, cfg.d_model, device=device, requires_grad=True)
    n = torch.randn(batch, context, cfg.d_model, device=device, dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn(batch, context, cfg.d_model, device=device, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(batch, context, cfg.d_model, device=device)
    g16 = g.bfloat16()
    inductor, fused, fused_next, norm = (
        torch.compile(m, dynamic=False) for m in (block, Fused(block), FusedNext(block), Norm())
    )

    def step(f, args, grads):
        def run():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = f(*args)
            torch.autograd.backward(out, grads)

        return run

    arms = {
        "inductor": step(inductor, (x,), (g,)),
        "fused": step(fused, (x,), (g,)),
        "fused_next": step(fused_next, (x, n), (g, g16)),
        "norm inductor": step(norm, (x, r), (g,)),
        "norm ours": step(lambda x, r: add_rmsnorm(x, r, block.ln2.weight), (x, r), (g, g16)),
        "norm ours compiled": step(torch.compile(lambda x, r: add_rmsnorm(x, r, block.ln2.weight)), (x, r), (g, g16)),
    }
    replays = {name: capture_graph(run, device, warmup_steps=3) for name, run in arms.items()}
    with torch._inductor.config.patch(coordinate_descent_tuning=True):  # compiled at its first call
        tuned = torch.compile(TransformerBlock.forward, dynamic=False)
        replays["inductor cdt"] = capture_graph(step(lambda x: tuned(block, x), (x,), (g,)), device, warmup_steps=3)
    times = {name: [] for name in replays}
    for _ in range(rounds):
        for name, replay in replays.items():
            times[name].append(triton.testing.do_bench(replay, warmup=25, rep=300))
    for name, ts in times.items():
        print(f"{name:14s} " + " ".join(f"{t * 1e3:8.1f}" for t in ts) + " us", flush=True)

    for name, replay in replays.items():
        replay()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            replay()
            torch.cuda.synchronize()
        events = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)
        print(f"\n{name}: kernels (us), {sum(e.device_time_total for e in events):.1f} in all")
        for e in events:
            if e.device_time_total < 1:
                continue
            print(f"  {e.device_time_total:8.1f} {e.count:3d}  {e.key[:100]}")


if __name__ == "__main__":
    main()
