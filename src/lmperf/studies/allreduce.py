"""All-reduce of float32 tensors timed like nccl-tests: per size, warm-up, then back-to-back timed
iterations; the median with its CI, algorithm and bus bandwidth from the median.

Run under torchrun, one process per rank (gloo: CPU processes; nccl: one GPU each):

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m lmperf.studies.allreduce \\
        --backend nccl --min-bytes 1024 --max-bytes 1073741824 --step-factor 4 --out results/allreduce/nccl-n2.csv

Sizes run from --min-bytes to --max-bytes, multiplying by --step-factor (nccl-tests' -b, -e, -f).
The sweep starts with ``warmup`` all-reduces of the largest size, then each size gets ``warmup``
untimed all-reduces, a barrier, then ``iters`` timed ones issued back to back with no
synchronization between them: on a GPU each is bracketed by CUDA events on the launching stream (the
collective's stream joins it), read after the last one; on a CPU by the host clock. An iteration's
time is the slowest rank's (all ranks take part in every iteration). Bus bandwidth is algorithm
bandwidth x 2(n-1)/n, the data each link carries in a ring all-reduce.
"""

import argparse
import logging
import os

import torch
import torch.distributed as dist

from lmperf.distributed.ranks import slowest_rank
from lmperf.measure import PhaseClock, fingerprint, summarize_ms, synchronize, write_rows
from lmperf.studies import run_study

log = logging.getLogger(__name__)


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min_bytes, min_bytes * factor, ... up to max_bytes, each a whole number of float32 elements."""
    if min_bytes < 4 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"need 4 <= min_bytes <= max_bytes and factor >= 2, got {min_bytes}, {max_bytes}, {factor}")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size // 4 * 4)
        size *= factor
    return out


def time_allreduce(nbytes: int, device: torch.device, warmup: int, iters: int) -> list[float]:
    """Seconds of each of ``iters`` back-to-back all-reduces of ``nbytes`` on this rank."""
    tensor = torch.randn(nbytes // 4, device=device, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    synchronize(device)
    dist.barrier()
    clock = PhaseClock(device)
    for _ in range(iters):
        with clock("all_reduce"):
            dist.all_reduce(tensor)
    return clock.seconds("all_reduce")


def sweep(backend: str, sizes_bytes: list[int], warmup: int, iters: int) -> list[dict] | None:
    """Rows on rank 0, None elsewhere."""
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    env = fingerprint(device)
    # Warm the communicator, its buffers and the GPU's clocks at the largest size first: in the H100
    # reference the first size swept (1 KiB) ran twice as slow as the next despite its own warm-up.
    time_allreduce(max(sizes_bytes), device, warmup, 0)
    rows = []
    for nbytes in sizes_bytes:
        slowest = slowest_rank(time_allreduce(nbytes, device, warmup, iters))
        stats = summarize_ms(slowest)
        algbw = nbytes / (stats["median_ms"] / 1e3) / 1e9
        rows.append(
            {
                "study": "allreduce",
                "backend": backend,
                "device": device.type,
                "world_size": world,
                "bytes": nbytes,
                "warmup": warmup,
                "iters": iters,
                "timer": "cuda_events" if device.type == "cuda" else "host_clock",
                **stats,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (world - 1) / world,
                "status": "ok",
                "note": "",
                **env,
            }
        )
    return rows if rank == 0 else None


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["gloo", "nccl"], required=True)
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=2**30)
    p.add_argument("--step-factor", type=int, default=4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    sizes_bytes = sizes(args.min_bytes, args.max_bytes, args.step_factor)
    world = int(os.environ["WORLD_SIZE"])
    if args.backend == "nccl" and torch.cuda.device_count() < world:
        if int(os.environ["RANK"]) == 0:  # not enough GPUs: a row saying so, not a failure
            write_rows(
                [
                    {
                        "study": "allreduce",
                        "backend": "nccl",
                        "world_size": world,
                        "status": "skipped",
                        "note": f"needs {world} GPUs, {torch.cuda.device_count()} visible",
                        **fingerprint(torch.device("cpu")),
                    }
                ],
                args.out,
            )
        return
    dist.init_process_group(args.backend)
    try:
        rows = sweep(args.backend, sizes_bytes, args.warmup, args.iters)
        if rows is not None:
            write_rows(rows, args.out)
            for r in rows:
                log.info(
                    f"{r['backend']} n={r['world_size']} {r['bytes']:>12} B median {r['median_ms']:9.4f} ms "
                    f"busbw {r['busbw_gbps']:7.2f} GB/s"
                )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    run_study(main)
