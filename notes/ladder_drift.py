"""What moves the replayed step between the GPU's two power states? (notes/ladder-power.md)

Ran at: 6a65df91d737 and 23d39056a9c0 (H100 80GB HBM3), output: the tables of notes/ladder-power.md (not kept
    as files)

The same `cuda_graph` replay read 460 W at 1980 MHz in the ladder study and 687 W at 1640 MHz in
ladder_order.py. Here one graph replays in timed, sampled blocks of BLOCK steps, between actions
named on the command line, in order:

    blocks:N   N blocks of BLOCK replays, each timed (CUDA events) and sampled (nvidia-smi)
    fresh      a fresh random batch, in place (the model has not fit it)
    reset      the initial weights and an empty AdamW state (``Ladder.reset``)
    profile    torch.profiler over 3 replays, as the ladder's kernel table takes them
    check      the ladder's loss check: reset, 20 replays, one fp32 eager forward
    state      an empty AdamW state, the weights kept (``Ladder.empty_state``)
    recapture  the graph captured again (the ladder captures each rung's graph anew for each turn)
    optbench   what the ladder's optimizers-alone pass (``optimizer_graphed_ms``) did to the model until
               99b8d44788af, when it began to reset it: every gradient set to ones, OPTBENCH_STEPS AdamW
               steps on the model's own weights and state (this form not yet run); then a new capture
    launched   (first only, before the capture) 20 launched steps of the same rung's step

Each block prints its median step, SM clock, power, temperature, clock-event reasons and the loss
after it. The run at 6a65df91d737 was ``blocks:12 fresh blocks:4 reset blocks:4``.

    PYTHONPATH=src python notes/ladder_drift.py 2.7B 1024 launched blocks:3 profile blocks:3 check blocks:3
"""

import statistics
import sys

import torch

from lmperf.measure import capture_graph
from lmperf.measure.power import nvidia_smi_id, sampled
from lmperf.studies.ladder import RUNGS, Ladder, kernel_times


def main() -> None:
    size, context, actions = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    BLOCK = 25
    OPTBENCH_STEPS = 30  # about what do_bench's 25 + 200 ms ran of four ~33 ms AdamW graphs at 2.7B
    SHOWN = ("sm_clock_mhz", "power_w", "temperature_c", "clock_event_reasons")  # of Samples.columns

    device = torch.device("cuda")
    rung = next(r for r in RUNGS if r.name == "cuda_graph")
    ladder = Ladder(size, context, 4, device, [rung])
    gpu = nvidia_smi_id(device)
    ladder.before(rung.name)
    if actions[:1] == ["launched"]:
        step = ladder.step(rung)
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        del step
        ladder.drop_grads()
        actions = actions[1:]

    def capture():
        ladder.before(rung.name)
        return capture_graph(ladder.step(rung), device, after_warmup=ladder.drop_grads)

    replay = capture()

    def block() -> tuple[float, dict]:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(BLOCK + 1)]
        with sampled(gpu) as clocks:
            events[0].record()
            for e in events[1:]:
                replay()
                e.record()
            torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in zip(events, events[1:])), clocks.columns("")

    print("after block steps median_ms sm_mhz power_w temp_c reasons loss_after", flush=True)
    steps, last = 0, "start"
    for action in actions:
        if action.startswith("blocks:"):
            for b in range(int(action.split(":")[1])):
                ms, c = block()
                steps += BLOCK
                loss = ladder.loss()
                ladder.before(rung.name)
                print(last, b, steps, f"{ms:.2f}", *(c[f] for f in SHOWN), f"{loss:.3f}", flush=True)
            continue
        if action == "fresh":
            ladder.tokens.copy_(torch.randint_like(ladder.tokens, ladder.model.cfg.vocab_size))
            ladder.targets.copy_(torch.randint_like(ladder.targets, ladder.model.cfg.vocab_size))
        elif action == "reset":
            ladder.reset()
        elif action == "profile":
            kernel_times(replay, device)
        elif action == "check":
            ladder.reset()
            for _ in range(20):
                replay()
            ladder.loss()
            ladder.before(rung.name)
        elif action == "state":
            ladder.empty_state()
        elif action in ("recapture", "optbench"):
            del replay
            ladder.drop_grads()
            if action == "optbench":
                for p in ladder.model.parameters():
                    p.grad = torch.ones_like(p)
                for _ in range(OPTBENCH_STEPS):
                    ladder.optimizers[Ladder.OWNER].step()
                ladder.drop_grads()
            replay = capture()
        else:
            raise SystemExit(f"unknown action {action!r}: see the docstring")
        last = action


if __name__ == "__main__":
    main()
