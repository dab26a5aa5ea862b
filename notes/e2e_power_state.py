"""Does the same 2.7B train step draw different power depending on which attention trained the model before?

In e2e, at 2.7B, context 1024, our attention's train step replayed at 1980 MHz and about 400 W where
naive attention's steps shared the process, and at about 1800 MHz and 680 W (the power limit) where
it ran alone or in the ladder (notes/one-allocation.md, section 10). This trains one compiled model
(bf16 autocast, lmperf AdamW at its default rate, e2e's batch of 4) in phases, each attention in
turn, and after each phase times that attention's step back to back for a few seconds while
nvidia-smi samples the SM clock and power; the loss (bf16 forward, no grad) and the count of
non-finite weights are printed after each phase.

    PYTHONPATH=src python notes/e2e_power_state.py [--steps 30] [--seconds 5] [--out FILE]

Ran at: b4797d8b81af (NVIDIA H200, torch 2.11), this script uncommitted then,
    output: notes/logs/2026-11-29-e2e_power_state-b4797d8-h200.txt
Ran at: eb21aba210d2 (NVIDIA H200, torch 2.11), ``--steps 10 --seconds 3``,
    output: notes/logs/2026-11-29-e2e_power_state-eb21aba-h200.txt
"""

import argparse
import statistics
import time
from pathlib import Path

import torch

from lmperf.measure.power import nvidia_smi_id, sampled
from lmperf.model import cross_entropy, make_optimizer
from lmperf.training import autocast_context, build_model, compile_blocks, make_step, random_batch, use_attention

PHASES = ("flash_triton", "naive", "flash_triton", "naive", "flash_triton")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="2.7B")
    p.add_argument("--context-length", type=int, default=1024)
    p.add_argument("--steps", type=int, default=30, help="train steps of each phase before it is timed")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds of back-to-back steps timed per phase")
    p.add_argument("--out", default="e2e_power_state.txt")
    args = p.parse_args()
    device = torch.device("cuda")
    model = build_model(args.size, args.context_length, device)
    compile_blocks(model)
    optimizer = make_optimizer("lmperf", model.parameters())
    tokens, targets = random_batch(model.cfg.vocab_size, 4, args.context_length, device)
    step = make_step("train_step", model, optimizer, tokens, targets, "bf16", device)
    gpu, lines = nvidia_smi_id(device), [f"{torch.cuda.get_device_name()}, {args.size}, context {args.context_length}"]
    for phase, attention in enumerate(PHASES):
        use_attention(model, attention)
        for _ in range(args.steps):
            step()
        with torch.no_grad(), autocast_context("bf16", device):
            loss = float(cross_entropy(model(tokens), targets))
        bad = sum(int((~torch.isfinite(p)).sum()) for p in model.parameters())
        times = []
        with sampled(gpu) as clocks:
            start = time.perf_counter()
            while time.perf_counter() - start < args.seconds:
                begun = time.perf_counter()
                step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - begun)
        c = clocks.columns("")
        median, late = (1e3 * statistics.median(t) for t in (times, times[len(times) // 2 :]))
        lines.append(
            f"phase {phase} {attention:>12}: loss {loss:.4f}, non-finite weights {bad}, step median {median:.1f} ms"
            f" (last half {late:.1f}), {c['sm_clock_mhz']:.0f} MHz, {c['power_w']:.0f} W, "
            f"{c['temperature_c']:.0f} C, reasons {c['clock_event_reasons']}"
        )
        print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
