"""Does a graphed rung's speed depend on its place in the replay order? (notes/ladder-power.md)

The ladder replays its graphed rungs one after another. At 152631d97a59 (2.7B, context 1024) every
replay after `cuda_graph`'s ran hotter and slower: `bf16_weights` at 677 W and 1680 MHz, and the
graphed `torch_fused_adamw` 25 ms slower than the graphed `fused_adamw`, which differs from it only
by 7 ms of optimizer. Here `cuda_graph` and `bf16_weights` take turns, A B A B A B, each captured,
held for 5 s, then timed for STEPS replays while nvidia-smi samples clock, power, temperature and
clock-event reasons every 100 ms.

    PYTHONPATH=src python notes/ladder_order.py 2.7B 1024 3 > order.log
"""

import statistics
import sys

import torch

from lmperf.measure import capture_graph
from lmperf.measure.power import hold, nvidia_smi_id, sampled
from lmperf.studies.ladder import RUNGS, Ladder

size, context, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
STEPS = 30
SHOWN = ("sm_clock_mhz", "power_w", "temperature_c", "clock_event_reasons")  # of Samples.columns

device = torch.device("cuda")
rungs = [r for r in RUNGS if r.name in ("cuda_graph", "bf16_weights")]
ladder = Ladder(size, context, 4, device, rungs)
gpu = nvidia_smi_id(device)


def timed(replay) -> list[float]:
    events = [torch.cuda.Event(enable_timing=True) for _ in range(STEPS + 1)]
    events[0].record()
    for e in events[1:]:
        replay()
        e.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(events, events[1:])]


print("round rung median_ms sm_mhz power_w temp_c reasons", flush=True)
for k in range(rounds):
    for r in rungs:
        ladder.before(r.name)
        replay = capture_graph(ladder.step(r), device, after_warmup=ladder.drop_grads)
        hold(replay, device, 5.0)
        with sampled(gpu) as clocks:
            ms = timed(replay)
        c = clocks.columns("")
        print(k, r.name, f"{statistics.median(ms):.2f}", *(c[f] for f in SHOWN), flush=True)
        del replay
        ladder.drop_grads()
        ladder.drop_bf16()
