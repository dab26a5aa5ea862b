"""Is the top rung at the energy bound of the 700 W cap? (notes/ladder-power.md)

Three arms, each a CUDA graph of the 2.7B fused-norms rung's work, in turns (A B C A B C), each from
the initial weights, held 5 s untimed, then replayed for about 6 s while nvidia-smi samples power:

- ``fwd_bwd``: the forward and backward alone (bf16 weights, fused norms, no update);
- ``adamw``: the fused AdamW alone (bf16 weights, fp32 masters), on the gradients of one real backward;
- ``step``: the rung's train step, the update run inside the backward on a side stream.

Energy per replay is the median board power times the median replay time; where pynvml is
installed, the energy counter's difference over the timed replays too. If the step's energy is about
the sum of the other two arms', overlap cannot beat (E_fwd_bwd + E_adamw) / 700 W: the 50% MFU bar
(176 ms at 2.7B) then needs less work, not a better schedule. The check can fail: a step that
costs less energy than its parts, or more, says the model is wrong.

    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 > energy.txt
"""

import statistics
import sys

import torch

from lmperf.measure import capture_graph
from lmperf.measure.power import hold, nvidia_smi_id, sampled
from lmperf.studies.ladder import RUNGS, Ladder
from lmperf.training import make_step

size, context, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
TIMED_S = 6.0
device = torch.device("cuda")
rung = next(r for r in RUNGS if r.name == "fused_norms")
ladder = Ladder(size, context, 4, device, [rung])
gpu = nvidia_smi_id(device)
try:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)

    def energy_j() -> float:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3

except Exception as error:  # noqa: BLE001 - no pynvml or no counter: the power samples alone
    print(f"no energy counter: {error}", flush=True)

    def energy_j() -> float:
        return float("nan")


def fwd_bwd():
    return make_step("forward_backward", ladder.fused_norms, None, ladder.tokens, ladder.targets, "bf16", device)


def arm(name: str):
    """The arm's graph, from the initial weights and an empty AdamW state."""
    ladder.start(rung.name)
    if name == "step":
        return capture_graph(ladder.step(rung), device, after_warmup=ladder.drop_grads)
    if name == "fwd_bwd":
        return capture_graph(fwd_bwd(), device, after_warmup=ladder.drop_grads)
    fwd_bwd()()  # real gradients on the bf16 weights, for the update to read
    return capture_graph(ladder.optimizer(rung.optimizer, rung.weights).step, device)


print("round arm replays median_ms sm_mhz power_w reasons energy_per_replay_j counter_j_per_replay", flush=True)
for k in range(rounds):
    for name in ("fwd_bwd", "adamw", "step"):
        replay = arm(name)
        held = hold(replay, device, 5.0)
        n = max(30, round(held / 5.0 * TIMED_S))
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        with sampled(gpu) as clocks:
            before = energy_j()
            events[0].record()
            for e in events[1:]:
                replay()
                e.record()
            torch.cuda.synchronize()
            after = energy_j()
        ms = statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:]))
        c = clocks.columns("")
        print(
            k, name, n, f"{ms:.2f}", c["sm_clock_mhz"], c["power_w"], c["clock_event_reasons"],
            f"{c['power_w'] * ms / 1e3:.2f}", f"{(after - before) / n:.2f}", flush=True,
        )  # fmt: skip
        del replay
        ladder.drop_grads()
        ladder.drop_bf16()
