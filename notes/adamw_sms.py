"""Does the fused AdamW cost fewer joules on fewer SMs? (the 50% MFU target, notes/ladder-power.md)

Ran at: 52ddc4b00974 (H100 80GB HBM3), output: notes/logs/2026-11-27-adamw_sms-52ddc4b.txt

The 2.7B step at context 1024 is bound by the board's 700 W cap: 50% MFU needs about 4 J less
work a step (report/reference/h100/ladder-loss/energy.txt). Its AdamW alone costs 17.5 J at 535 W.
The update is memory-bound, so the SMs mostly wait on HBM. If a waiting SM still burns power, running
the same update on fewer SMs at about the same bandwidth saves energy.

Arms, in turns (A B C D, A B C D): the AdamW update of the 2.7B model's parameter count, as one
flat tensor in the bf16-weights rung's layout (bf16 weights and gradients, fp32 masters and
moments: 28 B a parameter moved). The update is the one `lmperf.kernels.fused_adamw` does, with a
constant step size. Each arm launches 16 programs per SM. An arm of s SMs works on the s SMs of
lowest id (the ids the programs report, which need not be contiguous); a program elsewhere returns
at once. The others take BLOCK-element blocks off one atomic counter until none is left.

Each arm runs back to back for 3 s untimed, then for about 5 s timed. The script prints the median
time per update, the bandwidth at 28 B a parameter, the nvidia-smi medians, and the energy per
update from NVML's counter.

The check can fail. The all-SM arm should cost what energy.txt's AdamW alone cost (17.5 J,
32.8 ms): it is an independent measurement of the same traffic.

    PYTHONPATH=src python notes/adamw_sms.py 2 > notes/logs/DATE-adamw_sms-COMMIT.txt
"""

import sys

import torch
import triton
import triton.language as tl
from held_energy import held_and_timed

from lmperf.measure.power import nvidia_smi_id

N = 3_406_809_600  # the 2.7B model's parameters (report/reference/h100/ladder-grid-ab1a14a/ladder.csv)
BLOCK = 2048
PROGRAMS_PER_SM = 16
TIMED_S = 5.0


@triton.jit
def sm_id():
    """The id of the SM this program runs on (PTX %smid; ids need not be contiguous)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [tl.program_id(0)], tl.int32, False, 1)


@triton.jit
def where_programs_run(out_ptr):
    tl.store(out_ptr + tl.program_id(0), sm_id())


@triton.jit
def adamw_on_some_sms(
    p_ptr, w_ptr, g_ptr, m_ptr, v_ptr, counter_ptr, n, n_blocks, below, step_size, BLOCK: tl.constexpr
):
    """The update on the SMs whose id is below ``below``; the programs elsewhere return at once."""
    if sm_id() < below:
        block = tl.atomic_add(counter_ptr, 1)
        while block < n_blocks:
            offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            g = tl.load(g_ptr + offsets, mask=mask).to(tl.float32)
            m = 0.9 * tl.load(m_ptr + offsets, mask=mask) + 0.1 * g
            v = 0.999 * tl.load(v_ptr + offsets, mask=mask) + 0.001 * g * g
            w = tl.load(w_ptr + offsets, mask=mask)
            w = (w - step_size * m / (tl.sqrt(v) + 1e-8)) * 0.99999
            tl.store(m_ptr + offsets, m, mask=mask)
            tl.store(v_ptr + offsets, v, mask=mask)
            tl.store(w_ptr + offsets, w, mask=mask)
            tl.store(p_ptr + offsets, w.to(tl.bfloat16), mask=mask)
            block = tl.atomic_add(counter_ptr, 1)


def check(device: torch.device, n: int = 1_000_003, below: int = 1 << 30) -> float:
    """The kernel's update of n elements against the same update in float64 torch: the largest
    difference of the fp32 weights (the arms below are only worth timing if this is small)."""
    w = torch.randn(n, device=device)
    p, g = w.to(torch.bfloat16), torch.randn(n, device=device, dtype=torch.bfloat16)
    m, v, counter = torch.zeros_like(w), torch.zeros_like(w), torch.zeros(1, device=device, dtype=torch.int32)
    g64, w64 = g.double(), w.double()
    expect = (w64 - 1e-3 * (0.1 * g64) / ((0.001 * g64 * g64).sqrt() + 1e-8)) * 0.99999
    adamw_on_some_sms[(64,)](p, w, g, m, v, counter, n, triton.cdiv(n, BLOCK), below, 1e-3, BLOCK=BLOCK)
    return (w.double() - expect).abs().max().item()


def main(rounds: int) -> None:
    device = torch.device("cuda")
    print(f"largest difference from float64 over one update: {check(device):.2e}", flush=True)
    sms_all = torch.cuda.get_device_properties(device).multi_processor_count
    w = torch.randn(N, device=device)
    p, g = w.to(torch.bfloat16), torch.randn(N, device=device, dtype=torch.bfloat16) * 1e-3
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    counter = torch.zeros(1, device=device, dtype=torch.int32)
    n_blocks = triton.cdiv(N, BLOCK)
    gpu = nvidia_smi_id(device)

    programs = sms_all * PROGRAMS_PER_SM
    seen = torch.zeros(programs, device=device, dtype=torch.int32)
    where_programs_run[(programs,)](seen)
    ids = sorted(set(seen.tolist()))  # an arm of s SMs runs below the s-th smallest id
    print(f"{len(ids)} SMs ran the {programs} programs, ids {ids[0]}..{ids[-1]}", flush=True)

    def update(sms: int):
        below = ids[sms] if sms < len(ids) else ids[-1] + 1

        def run():
            counter.zero_()
            adamw_on_some_sms[(programs,)](p, w, g, m, v, counter, N, n_blocks, below, 1e-5, BLOCK=BLOCK)

        return run

    arms = [len(ids), len(ids) * 3 // 4, len(ids) // 2, len(ids) // 4]
    print("round sms updates median_ms gbps sm_mhz power_w reasons counter_j_per_update", flush=True)
    for k in range(rounds):
        for sms in arms:
            run = update(sms)
            timed = held_and_timed(run, device, 3.0, TIMED_S, 20, gpu)
            ms, c = timed.median_ms, timed.clocks.columns("")
            print(
                k, sms, timed.runs, f"{ms:.2f}", f"{28 * N / ms / 1e6:.0f}", c["sm_clock_mhz"], c["power_w"],
                c["clock_event_reasons"], f"{timed.joules_per_run:.2f}", flush=True,
            )  # fmt: skip
    done = counter.item()
    assert done >= n_blocks, f"the last update took {done} of {n_blocks} blocks"


if __name__ == "__main__":
    main(int(sys.argv[1]))
