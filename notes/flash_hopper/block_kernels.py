"""What the model's path adds around our attention kernels: one compiled Transformer
block of a model size at one context, batch 4, bf16 autocast, forward + backward, with our
attention (`flash_triton`) and with SDPA. Each block's step is captured as a CUDA graph; the two
replays are timed in turns (do_bench medians, 5 rounds), then profiled (torch.profiler, 20
replays each), and every kernel's time per step is printed for both, sorted by the difference.

Ran at: 131ab02f8450 (H100 80GB HBM3, large at contexts 1024 and 512, one arm a process), output:
    notes/flash_hopper/logs/2026-11-26-block_kernels-large-131ab02.txt

    PYTHONPATH=src python notes/flash_hopper/block_kernels.py [SIZE] [CONTEXT] [ARMS] [JSON]
    (default large 1024 flash_triton,sdpa; JSON: where to write the arms' kernel times)

Both arms' graphs in one process crashed on the H100 (an illegal memory access in the first arm's
replays after the second arm's capture, with separate pools or one shared); each arm alone ran. So
the A/B in notes/flash-hopper.md ran one arm a process, and `block_kernels_diff.py` compares them.
"""

import collections
import json
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

from lmperf.attention import ATTENTION
from lmperf.measure.timing import capture_graph, graph_pool
from lmperf.model.sizes import SIZES
from lmperf.model.transformer import ModelConfig, RotaryEmbedding, TransformerBlock


def main() -> None:
    SIZE = sys.argv[1] if len(sys.argv) > 1 else "large"
    CONTEXT = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    PROFILED = 20
    d_model, d_ff, _, heads = SIZES[SIZE]
    cfg = ModelConfig(10000, CONTEXT, d_model, d_ff, 1, heads)
    device = torch.device("cuda")
    rope = RotaryEmbedding(cfg.d_head, CONTEXT, cfg.rope_theta, device)
    grad = torch.randn(4, CONTEXT, d_model, device=device)

    ARMS = sys.argv[3].split(",") if len(sys.argv) > 3 else ["flash_triton", "sdpa"]
    replays, pool = {}, graph_pool(device)  # one pool, as the e2e harness's graphs share
    for name in ARMS:
        # each arm its own input and block, so that no capture frees what another graph writes
        x = torch.randn(4, CONTEXT, d_model, device=device, requires_grad=True)
        block = torch.compile(TransformerBlock(cfg, rope, ATTENTION[name], device), dynamic=False)

        def step(block=block, x=x):
            with torch.autocast("cuda", torch.bfloat16):
                out = block(x)
            out.backward(grad)

        def drop_grads(block=block, x=x):
            x.grad = None
            block.zero_grad(set_to_none=True)

        for _ in range(3):
            step()
            drop_grads()
        torch.cuda.synchronize()
        print(name, "launched steps ran", flush=True)
        replays[name] = capture_graph(step, device, pool, after_warmup=drop_grads)
        replays[name]()
        torch.cuda.synchronize()
        print(name, "captured and replayed once", flush=True)

    times = collections.defaultdict(list)
    for _ in range(5):
        for name, replay in replays.items():
            times[name].append(do_bench(replay, warmup=50, rep=300, return_mode="median") * 1e3)
    print(f"{torch.cuda.get_device_name()}: one {SIZE} block, context {CONTEXT}, batch 4, replayed fwd+bwd")
    for name, us in times.items():
        print(f"  {name:>12}: {statistics.median(us):8.1f} us  {[round(t, 1) for t in us]}")

    kernels = {}
    for name, replay in replays.items():
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED):
                replay()
            torch.cuda.synchronize()
        per = collections.Counter()
        calls = collections.Counter()
        for event in prof.events():
            if event.device_type == torch.autograd.DeviceType.CUDA:
                per[event.name] += event.device_time / PROFILED
                calls[event.name] += 1 / PROFILED
        kernels[name] = (per, calls)
        print(f"  {name:>12}: kernels {sum(per.values()):8.1f} us a step, {round(sum(calls.values()))} launches")

    if len(sys.argv) > 4:  # one arm a process: keep its kernels for a later comparison
        Path(sys.argv[4]).write_text(
            json.dumps({name: [dict(per), dict(calls)] for name, (per, calls) in kernels.items()})
        )
    if len(kernels) < 2:
        sys.exit()
    ours, sdpa = kernels["flash_triton"], kernels["sdpa"]
    rows = sorted(set(ours[0]) | set(sdpa[0]), key=lambda k: -abs(ours[0][k] - sdpa[0][k]))
    print(f"\n{'ours us':>9} {'sdpa us':>9} {'diff':>8} {'calls':>9}  kernel")
    for k in rows[:30]:
        print(
            f"{ours[0][k]:9.1f} {sdpa[0][k]:9.1f} {ours[0][k] - sdpa[0][k]:8.1f} "
            f"{ours[1][k]:4.0f}/{sdpa[1][k]:<4.0f}  {k[:110]}"
        )


if __name__ == "__main__":
    main()
