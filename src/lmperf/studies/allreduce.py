"""All-reduce of float32 tensors: time, algorithm bandwidth and bus bandwidth per size.

Run under torchrun, one process per rank (gloo: CPU processes; nccl: one GPU each):

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m lmperf.studies.allreduce \\
        --backend gloo --sizes-mb 1,10 --out results/allreduce/gloo-n2.csv

Each size gets ``warmup`` untimed all-reduces, then ``iters`` timed ones, each synchronized; the
time of an iteration is the slowest rank's, gathered with all_gather_object. Bus bandwidth is
algorithm bandwidth x 2(n-1)/n, the data each link carries in a ring all-reduce. 1 MB = 2^20 bytes.
"""

import argparse
import os
import statistics

import torch
import torch.distributed as dist

from lmperf.measure import fingerprint, time_once, write_rows


def time_allreduce(numel: int, device: torch.device, warmup: int, iters: int) -> list[float]:
    tensor = torch.randn(numel, device=device, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    times = []
    for _ in range(iters):
        dist.barrier()  # ranks start together, so the time is the collective's, not a straggler's
        times.append(time_once(lambda: dist.all_reduce(tensor), device)[0])
    return times


def sweep(backend: str, sizes_mb: list[float], warmup: int, iters: int) -> list[dict] | None:
    """Rows on rank 0, None elsewhere."""
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    env = fingerprint(device)
    rows = []
    for size_mb in sizes_mb:
        numel = int(size_mb * 2**20) // 4
        mine = time_allreduce(numel, device, warmup, iters)
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        slowest = [max(per_rank[i] for per_rank in everyone) for i in range(iters)]
        mean = statistics.fmean(slowest)
        algbw = numel * 4 / mean / 1e9
        rows.append({
            "study": "allreduce", "backend": backend, "device": device.type, "world_size": world, "size_mb": size_mb,
            "bytes": numel * 4, "warmup": warmup, "iters": iters, "mean_ms": mean * 1e3,
            "median_ms": statistics.median(slowest) * 1e3, "std_ms": statistics.stdev(slowest) * 1e3 if iters > 1 else 0.0,
            "min_ms": min(slowest) * 1e3, "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world,
            "status": "ok", "note": "", **env,
        })
    return rows if rank == 0 else None


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["gloo", "nccl"], required=True)
    p.add_argument("--sizes-mb", default="1,10,100,1024", help="comma-separated sizes in MB (2^20 bytes)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    world = int(os.environ["WORLD_SIZE"])
    if args.backend == "nccl" and torch.cuda.device_count() < world:
        if int(os.environ["RANK"]) == 0:  # not enough GPUs: a row saying so, not a failure
            write_rows([{"study": "allreduce", "backend": "nccl", "world_size": world, "status": "skipped",
                         "note": f"needs {world} GPUs, {torch.cuda.device_count()} visible",
                         **fingerprint(torch.device("cpu"))}], args.out)
        return
    dist.init_process_group(args.backend)
    try:
        rows = sweep(args.backend, [float(s) for s in args.sizes_mb.split(",")], args.warmup, args.iters)
        if rows is not None:
            write_rows(rows, args.out)
            for r in rows:
                print(f"{r['backend']} n={r['world_size']} {r['size_mb']:>7} MB {r['mean_ms']:9.3f} ms "
                      f"busbw {r['busbw_gbps']:7.2f} GB/s", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
