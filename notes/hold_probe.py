"""Does a hold that ends on the power probe time the same step as one that waits for steady windows?

``lmperf.measure.power.hold`` ends a hold once three 0.25 s windows of steps agree, or, given the
GPU, sooner where nvidia-smi's instantaneous power stays below 80% of the limit at the top SM clock.
This times graphed replays of e2e points after each rule in one process, in rounds, the rules'
order alternating, each hold coming after one of two states the block before can leave: the GPU
idle (``idle``: half a second of sleep) or at its power limit (``capped``: bf16 GEMMs back to back
for 1.2 s). After the cap, the probe must see the lowered clock and keep the windows.

    PYTHONPATH=src python notes/hold_probe.py [--rounds 4] [--steps 20] [--out FILE]

Ran at: a41e378914bf (NVIDIA H200), output: notes/logs/2026-11-30-hold_probe-a41e378-h200.txt
"""

import argparse
import statistics
import time
from functools import partial
from pathlib import Path

import torch

from lmperf.measure.power import hold, nvidia_smi_id
from lmperf.measure.timing import capture_graph
from lmperf.model import make_optimizer
from lmperf.training import build_model, make_step, random_batch

POINTS = (("small", 128, "forward_backward"), ("small", 1024, "train_step"), ("medium", 1024, "train_step"),
          ("xl", 512, "train_step"))  # fmt: skip


def capped(device, seconds=1.2):
    """bf16 GEMMs back to back: the GPU at its power limit, its clock lowered."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize(device)


def idle(device, seconds=0.5):
    time.sleep(seconds)


def timed_ms(replay, device, steps):
    times = []
    for _ in range(steps):
        begun = time.perf_counter()
        replay()
        torch.cuda.synchronize(device)
        times.append(1e3 * (time.perf_counter() - begun))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="replays timed after each hold")
    p.add_argument("--out", default="hold_probe.txt")
    args = p.parse_args()
    device = torch.device("cuda")
    gpu = nvidia_smi_id(device)
    lines = [f"{torch.cuda.get_device_name()}; rounds {args.rounds}, {args.steps} replays timed after each hold"]
    lines.append("size ctx mode before: windows ms (held s) | probe ms (held s) | probe/windows median (min-max)")
    for size, ctx, mode in POINTS:
        model = build_model(size, ctx, device)
        optimizer = make_optimizer("lmperf", model.parameters())
        tokens, targets = random_batch(model.cfg.vocab_size, 4, ctx, device)
        step = make_step(mode, model, optimizer, tokens, targets, "bf16", device)
        replay = capture_graph(step, device, after_warmup=partial(model.zero_grad, set_to_none=True))
        for before in (idle, capped):
            got = {"windows": [], "probe": []}
            for r in range(args.rounds):
                rules = ("windows", "probe") if r % 2 == 0 else ("probe", "windows")
                for rule in rules:
                    before(device)
                    held_s = hold(replay, device, 2.0, gpu=gpu if rule == "probe" else None).seconds
                    got[rule].append((timed_ms(replay, device, args.steps), held_s))
            ratios = [p[0] / w[0] for p, w in zip(got["probe"], got["windows"], strict=True)]
            w_ms, w_s, p_ms, p_s = (
                statistics.median(x[i] for x in got[k]) for k in ("windows", "probe") for i in (0, 1)
            )
            lines.append(
                f"{size} {ctx} {mode} {before.__name__}: {w_ms:.4f} ({w_s:.2f}) | {p_ms:.4f} ({p_s:.2f}) | "
                f"{statistics.median(ratios):.4f} ({min(ratios):.4f}-{max(ratios):.4f}); "
                f"held s, probe: {' '.join(f'{x[1]:.2f}' for x in got['probe'])}"
            )
            print(lines[-1], flush=True)
        del replay, step, optimizer, model
        torch.cuda.empty_cache()
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
