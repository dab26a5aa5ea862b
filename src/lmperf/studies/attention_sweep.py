"""Naive attention at scale: forward and backward time and the memory held for backward, per (d, seq).

    python -m lmperf.studies.attention_sweep --d 64 --seq-lengths 256,1024 --out results/attention/eager-d64.csv

Batch 8, no head dimension, random Q, K, V, no mask. Per sequence length: warm-up passes, then
``steps`` forward passes each synchronized and timed, the memory allocated once a forward has run
(what backward will need), then ``steps`` backward passes, each after an untimed forward. With --compile
the attention function is torch.compile'd; its first call (compilation) is reported apart.
Out-of-memory is a row; so are the bytes autograd saves, observed through saved_tensors_hooks.
"""

import argparse
import gc
import logging

import torch

from lmperf.attention import naive_attention
from lmperf.attention.accounting import naive_attention_saved_bytes, observed_saved_bytes
from lmperf.measure import fingerprint, resolve_device, summarize_ms, time_once, write_rows
from lmperf.measure.phases import phase
from lmperf.recompiles import compile_per_shape
from lmperf.studies import int_list, run_study

log = logging.getLogger(__name__)


def _timed(fn, steps: int, device, setup=lambda: None) -> list[float]:
    """Seconds of fn(setup()) per step, synchronized; setup's own time is not counted."""
    times = []
    for _ in range(steps):
        arg = setup()
        times.append(time_once(lambda: fn(arg), device)[0])
    return times


def measure(attention, batch: int, seq: int, d: int, steps: int, warmup: int, device) -> dict:
    cuda = device.type == "cuda"
    q, k, v = (torch.randn(batch, seq, d, device=device, requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, seq, d, device=device)
    with phase("warmup"):
        first = _timed(lambda _: attention(q, k, v).backward(grad), 1, device)[0]  # compiles when compiled
        for _ in range(warmup):
            attention(q, k, v).backward(grad)
    with phase("timed"):
        forward = _timed(lambda _: attention(q, k, v), steps, device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        before_forward = torch.cuda.memory_allocated(device)
    out = attention(q, k, v)
    row = {
        "mem_before_backward_mib": torch.cuda.memory_allocated(device) / 2**20 if cuda else float("nan"),
        "held_for_backward_mib": (torch.cuda.memory_allocated(device) - before_forward) / 2**20
        if cuda
        else float("nan"),
    }
    out.backward(grad)
    del out
    # each backward gets a fresh, untimed forward (compiled backward graphs cannot be retained)
    with phase("timed"):
        backward = _timed(lambda out: out.backward(grad), steps, device, setup=lambda: attention(q, k, v))
    row["peak_mem_mib"] = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else float("nan")
    fwd, bwd = summarize_ms(forward), summarize_ms(backward)
    return {
        **row,
        "first_call_ms": first * 1e3,
        **{f"forward_{k}": v for k, v in fwd.items()},
        **{f"backward_{k}": v for k, v in bwd.items()},
    }


def sweep(d: int, seq_lengths, compiled: bool, batch: int, steps: int, warmup: int, device) -> list[dict]:
    env = fingerprint(device)
    attention = compile_per_shape(naive_attention) if compiled else naive_attention  # a graph per length
    total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else float("nan")
    rows = []
    for seq in seq_lengths:
        computed = naive_attention_saved_bytes(batch, seq, d)
        row = {
            "study": "attention_sweep",
            "compile": "compiled" if compiled else "eager",
            "batch": batch,
            "d": d,
            "seq": seq,
            "steps": steps,
            "computed_saved_mib": sum(computed.values()) / 2**20,
            "computed_square_mib": (computed["scores"] + computed["exp"] + computed["P"]) / 2**20,
            "device_total_mib": total / 2**20,
            "status": "ok",
            "note": "",
        }
        try:
            row.update(measure(attention, batch, seq, d, steps, warmup, device))
            if not compiled:  # what autograd saves, observed (one more forward, on the device)
                small = [torch.randn(batch, seq, d, device=device, requires_grad=True) for _ in range(3)]
                row["observed_saved_mib"] = observed_saved_bytes(naive_attention, *small) / 2**20
                del small
        except torch.OutOfMemoryError as error:
            row.update(status="oom", note=str(error).split(" GPU ")[0])
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        log.info(
            f"d {d:>4} seq {seq:>6} {row['compile']:>8} {row['status']:>4} "
            f"fwd {row.get('forward_mean_ms', float('nan')):9.3f} ms bwd "
            f"{row.get('backward_mean_ms', float('nan')):9.3f} ms"
        )
        rows.append({**row, **env})
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--seq-lengths", type=int_list, required=True, help="comma-separated")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    write_rows(
        sweep(args.d, args.seq_lengths, args.compile, args.batch, args.steps, args.warmup, resolve_device(args.device)),
        args.out,
    )


if __name__ == "__main__":
    run_study(main)
