"""Does the replayed step's power follow the training it does? (notes/ladder-power.md)

The same `cuda_graph` replay read 460 W at 1980 MHz in the ladder study and 687 W at 1640 MHz in
ladder_order.py. Each replay is a real train step on one fixed batch, so the data the GEMMs see
drifts as the model fits that batch. Here one graph replays in blocks of BLOCK steps, each timed and
sampled: first from the initial weights, then on a fresh random batch (tokens replaced in place),
then back at the initial weights (``Ladder.reset``). The loss (the ladder's fp32 yardstick) is taken
after each block.

    PYTHONPATH=src python notes/ladder_drift.py 2.7B 1024 > drift.log
"""

import statistics
import subprocess
import sys

import torch

from lmperf.measure import capture_graph
from lmperf.measure.power import nvidia_smi_id
from lmperf.studies.ladder import RUNGS, Ladder

size, context = sys.argv[1], int(sys.argv[2])
BLOCK = 25
FIELDS = "clocks.sm,power.draw,temperature.gpu"
PHASES = (("initial weights", 12), ("fresh batch", 4), ("reset weights", 4))

device = torch.device("cuda")
rung = next(r for r in RUNGS if r.name == "cuda_graph")
ladder = Ladder(size, context, 4, device, [rung])
gpu = nvidia_smi_id(device)
ladder.before(rung.name)
replay = capture_graph(ladder.step(rung), device, after_warmup=ladder.drop_grads)


def block() -> tuple[float, list[float]]:
    smi = subprocess.Popen(
        ["nvidia-smi", "-i", gpu, f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=subprocess.PIPE,
        text=True,
    )
    events = [torch.cuda.Event(enable_timing=True) for _ in range(BLOCK + 1)]
    events[0].record()
    for e in events[1:]:
        replay()
        e.record()
    torch.cuda.synchronize()
    smi.terminate()
    rows = [line.split(", ") for line in smi.communicate()[0].splitlines() if line.count(",") == 2]
    ms = statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:]))
    return ms, [statistics.median(float(row[i]) for row in rows) for i in range(3)]


print("phase block steps median_ms sm_mhz power_w temp_c loss_after", flush=True)
steps = 0
for phase, blocks in PHASES:
    if phase == "fresh batch":
        ladder.tokens.copy_(torch.randint_like(ladder.tokens, ladder.model.cfg.vocab_size))
        ladder.targets.copy_(torch.randint_like(ladder.targets, ladder.model.cfg.vocab_size))
    if phase == "reset weights":
        ladder.reset()
    for b in range(blocks):
        ms, (mhz, watts, temp) = block()
        steps += BLOCK
        loss = ladder.loss()
        ladder.before(rung.name)
        print(phase.replace(" ", "_"), b, steps, f"{ms:.2f}", mhz, watts, temp, f"{loss:.3f}", flush=True)
