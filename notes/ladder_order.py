"""Does a rung's speed depend on its place in the order, or on being launched or replayed?
(notes/ladder-power.md)

Ran at: 7e0584e54995, bdfc15c37192 and 7c8137f422f3 (H100 80GB HBM3), output: the tables of
    notes/ladder-power.md (not kept as files)
Ran at: e65fe7b50dbc (H100 80GB HBM3), outputs: report/reference/h100/ladder-norms/order.txt and the
    carve-out numbers of notes/ladder-power.md
Ran at: 4516536e1be4 (H100 80GB HBM3), output: report/reference/h100/ladder-loss/order-packed.txt
Ran at: 26512c021bf3 (H100 80GB HBM3), output: report/reference/h100/ladder-loss/order.txt

Arms take turns, A B A B: each arm is a rung of the ladder, ``rung:replay`` (its step captured as a
CUDA graph) or ``rung:launched`` (its step launched as it is); ``rung:replay:C`` captures the step
with C SMs carved out of every cuBLAS GEMM (``torch._C._set_sm_carveout_experimental``), so that the
in-backward AdamW on its side stream has SMs of its own. Each turn starts from the initial
weights and an empty AdamW state, runs the arm untimed for 5 s, then times STEPS steps (CUDA events)
while nvidia-smi samples clock, power, temperature and clock-event reasons every 100 ms.

The run at 7e0584e54995 was ``2.7B 1024 3 cuda_graph:replay bf16_weights:replay``.

    PYTHONPATH=src python notes/ladder_order.py 2.7B 1024 2 fused_adamw:launched cuda_graph:replay \\
        > notes/logs/DATE-ladder_order-COMMIT.txt
"""

import statistics
import sys

import torch

from lmperf.measure import capture_graph
from lmperf.measure.power import hold, nvidia_smi_id, sampled
from lmperf.studies.ladder import RUNGS, Ladder


def main() -> None:
    size, context, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    arms = [(*arm.split(":"), "")[:3] for arm in sys.argv[4:]]
    STEPS = 30
    SHOWN = ("sm_clock_mhz", "power_w", "temperature_c", "clock_event_reasons")  # of Samples.columns

    device = torch.device("cuda")
    rungs = {r.name: r for r in RUNGS if r.name in {arm[0] for arm in arms}}
    ladder = Ladder(size, context, 4, device, list(rungs.values()))
    gpu = nvidia_smi_id(device)

    def timed(step) -> list[float]:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(STEPS + 1)]
        events[0].record()
        for e in events[1:]:
            step()
            e.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in zip(events, events[1:])]

    print("round rung how carveout median_ms sm_mhz power_w temp_c reasons", flush=True)
    for k in range(rounds):
        for name, how, carveout in arms:
            ladder.start(name)
            step = ladder.step(rungs[name])
            if how == "replay":
                torch._C._set_sm_carveout_experimental(int(carveout) if carveout else None)
                step = capture_graph(step, device, after_warmup=ladder.drop_grads)
                torch._C._set_sm_carveout_experimental(None)
            hold(step, device, 5.0, until_steady=False)
            with sampled(gpu) as clocks:
                ms = timed(step)
            c = clocks.columns("")
            print(k, name, how, carveout or 0, f"{statistics.median(ms):.2f}", *(c[f] for f in SHOWN), flush=True)
            del step
            ladder.drop_grads()
            ladder.drop_bf16()


if __name__ == "__main__":
    main()
