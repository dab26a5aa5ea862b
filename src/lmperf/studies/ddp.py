"""Data-parallel training on N ranks: step time and exposed communication per DDP variant, optimizer
state sharding's memory, and a kernel timeline of naive vs overlapped DDP.

Run under torchrun, one process per rank (NCCL, one GPU each, where there are enough GPUs; gloo on
CPU processes otherwise):

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m lmperf.studies.ddp train \\
        --size xl --context-length 128 --global-batch 4 --out results/ddp/train-b4.csv
    ... -m lmperf.studies.ddp sharding --size xl --global-batch 4 --out results/ddp/sharding.csv
    ... -m lmperf.studies.ddp timeline --size xl --global-batch 4 --out results/ddp/timeline.csv

Every variant runs in the same process on a freshly built model with the same seed, so the rows
compare like with like. ``local`` is the same step with no gradient synchronization at all: the
compute-only baseline. A variant's exposed communication is its step time minus local's; for the
naive variant, which overlaps nothing, that is its whole communication time, so

    hidden fraction of variant v = 1 - exposed(v) / exposed(naive).

``sync_ms`` is the CUDA-event time from the end of backward to the end of
finish_gradient_synchronization(): what the step waits for after backward.
"""

import argparse
import os
import statistics
from contextlib import contextmanager

import torch
import torch.distributed as dist

from lmperf.distributed import DDPBucketed, DDPFlat, DDPIndividualParameters, DDPNaive, ShardedOptimizer
from lmperf.measure import Budget, fingerprint, free_memory, measure, synchronize, time_once, write_rows
from lmperf.model import count_parameters, make_optimizer
from lmperf.ranges import profiled_range
from lmperf.training import Phase, build_model, make_step

VARIANTS = ("local", "naive", "flat", "individual", "bucketed-1", "bucketed-10", "bucketed-100", "bucketed-1000",
            "torch_ddp")


def wrap(variant: str, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    if variant == "local":
        return model
    if variant == "naive":
        return DDPNaive(model)
    if variant == "flat":
        return DDPFlat(model)
    if variant == "individual":
        return DDPIndividualParameters(model)
    if variant.startswith("bucketed-"):
        return DDPBucketed(model, float(variant.split("-", 1)[1]))
    if variant == "torch_ddp":
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    raise ValueError(f"unknown DDP variant {variant!r}; choose from {', '.join(VARIANTS)}")


class Batch:
    """This rank's slice of a global batch of random tokens (the same global batch on every rank)."""

    def __init__(self, vocab: int, global_batch: int, ctx: int, device: torch.device):
        rank, world = dist.get_rank(), dist.get_world_size()
        if global_batch % world:
            raise ValueError(f"--global-batch {global_batch} does not split over {world} ranks")
        generator = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, vocab, (global_batch, ctx + 1), generator=generator)
        mine = tokens.chunk(world)[rank]
        self.inputs, self.targets = mine[:, :-1].to(device), mine[:, 1:].to(device)


def make_train_step(ddp: torch.nn.Module, optimizer, batch: Batch, device: torch.device, phase: Phase = profiled_range):
    """lmperf.training's train step on ``ddp``, timing the wait for the gradient all-reduce after
    backward; returns the step and the list its sync times go into."""
    sync_s: list = []
    finish = getattr(ddp, "finish_gradient_synchronization", None)

    def timed_finish():
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            finish()
            end.record()
            sync_s.append((start, end))
        else:
            sync_s.append(time_once(finish, device)[0])

    step = make_step("train_step", ddp, optimizer, batch.inputs, batch.targets, "fp32", device, phase=phase,
                     after_backward=timed_finish if finish is not None else None)
    return step, sync_s


def _seconds(sample) -> float:
    return sample[0].elapsed_time(sample[1]) / 1e3 if isinstance(sample, tuple) else sample


def slowest_rank(values: list[float]) -> list[float]:
    """Per-iteration maximum over ranks: a data-parallel step is as slow as its slowest rank."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, values)
    return [max(per_rank[i] for per_rank in everyone) for i in range(len(values))]


def variant_step(variant: str, args, device: torch.device):
    """A fresh model (same seed every time) wrapped as ``variant``, its optimizer and its train step."""
    model = build_model(args.size, args.context_length, device)
    ddp = wrap(variant, model, device)
    optimizer = make_optimizer(args.optimizer, model.parameters())
    batch = Batch(model.cfg.vocab_size, args.global_batch, args.context_length, device)
    step, sync = make_train_step(ddp, optimizer, batch, device)
    return model, ddp, step, sync


def train_rows(args, device: torch.device, env: dict) -> list[dict]:
    world = dist.get_world_size()
    rows = []
    for variant in args.variants:
        row = {"study": "ddp_train", "variant": variant, "size": args.size, "context_length": args.context_length,
               "global_batch": args.global_batch, "world_size": world, "warmup": args.warmup, "steps": args.steps,
               "status": "ok", "note": ""}
        try:
            model, ddp, step, sync = variant_step(variant, args, device)
            times = measure({variant: step}, device, args.warmup, Budget(args.steps, max_steps=args.steps))[variant].host_s
            synced = [_seconds(s) for s in sync[args.warmup:]]
            step_s = slowest_rank(times)
            row.update(params=count_parameters(model), grad_mib=sum(p.numel() * 4 for p in model.parameters()) / 2**20,
                       step_ms=statistics.fmean(step_s) * 1e3, step_std_ms=statistics.pstdev(step_s) * 1e3,
                       step_median_ms=statistics.median(step_s) * 1e3)
            if synced:
                row["sync_ms"] = statistics.fmean(slowest_rank(synced)) * 1e3
            if variant.startswith("bucketed-"):
                row["buckets"] = len(ddp.buckets)
        except torch.OutOfMemoryError as error:
            row.update(status="oom", note=str(error).splitlines()[0])
        if dist.get_rank() == 0:
            print(f"{variant:>14} {row['status']} step {row.get('step_ms', float('nan')):9.2f} ms "
                  f"sync {row.get('sync_ms', float('nan')):8.2f} ms", flush=True)
        rows.append({**row, **env})
        model = ddp = step = None
        free_memory(device)
    return rows


def sharding_rows(args, device: torch.device, env: dict) -> list[dict]:
    """Memory at the handout's three points, with and without sharding AdamW's state.

    Gradients are synchronized by DDPIndividualParameters, which keeps no buffers of its own, so the
    only difference between the two runs is where the optimizer state lives.
    """
    if device.type != "cuda":
        return [{"study": "ddp_sharding", "status": "skipped", "note": "memory accounting needs CUDA allocator stats",
                 **env}]
    rows = []
    for sharded in (False, True):
        mib = lambda b: b / 2**20  # noqa: E731
        torch.cuda.reset_peak_memory_stats(device)
        model = build_model(args.size, args.context_length, device)
        after_build = torch.cuda.max_memory_allocated(device)
        ddp = DDPIndividualParameters(model)
        optimizer = (ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-4) if sharded
                     else torch.optim.AdamW(model.parameters(), lr=1e-4))
        batch = Batch(model.cfg.vocab_size, args.global_batch, args.context_length, device)
        readings = {}

        @contextmanager
        def phase(name):  # allocator readings around the optimizer step
            if name == "optimizer step":
                synchronize(device)
                readings.update(before_step=torch.cuda.memory_allocated(device),
                                peak_before_step=torch.cuda.max_memory_allocated(device))
                torch.cuda.reset_peak_memory_stats(device)
            yield
            if name == "optimizer step":
                synchronize(device)
                readings.update(after_step=torch.cuda.memory_allocated(device),
                                peak_during_step=torch.cuda.max_memory_allocated(device))
                torch.cuda.reset_peak_memory_stats(device)  # the next peak_before_step covers forward + backward only

        step, _ = make_train_step(ddp, optimizer, batch, device, phase)
        times = measure({"step": step}, device, args.warmup, Budget(args.steps, max_steps=args.steps))["step"].host_s
        before_step, peak_before_step = readings["before_step"], readings["peak_before_step"]
        after_step, peak_during_step = readings["after_step"], readings["peak_during_step"]
        params = list(model.parameters())
        local = optimizer.local_optimizer if sharded else optimizer
        state_bytes = sum(t.numel() * t.element_size() for s in (local.state.values() if local else [])
                          for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
        rows.append({
            "study": "ddp_sharding", "sharded": sharded, "size": args.size, "context_length": args.context_length,
            "global_batch": args.global_batch, "world_size": dist.get_world_size(), "optimizer": "torch.optim.AdamW",
            "params": sum(p.numel() for p in params),
            "param_mib": mib(sum(p.numel() * p.element_size() for p in params)),
            "grad_mib": mib(sum(p.numel() * p.element_size() for p in params)),
            "optimizer_state_mib": mib(state_bytes),
            "peak_after_build_mib": mib(after_build), "allocated_before_step_mib": mib(before_step),
            "peak_before_step_mib": mib(peak_before_step), "allocated_after_step_mib": mib(after_step),
            "peak_during_step_mib": mib(peak_during_step),
            "step_ms": statistics.fmean(slowest_rank(times)) * 1e3, "status": "ok", "note": "", **env,
        })
        model = ddp = optimizer = local = params = None
        free_memory(device)
    return rows


def timeline_rows(args, device: torch.device, env: dict) -> list[dict]:
    """GPU kernels of one training step per variant, from torch.profiler, on rank 0's GPU."""
    if device.type != "cuda":
        return [{"study": "ddp_timeline", "status": "skipped", "note": "a kernel timeline needs CUDA", **env}]
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for variant in args.variants:
        _, _, step, _ = variant_step(variant, args, device)
        for _ in range(args.warmup):
            step()
        synchronize(device)
        dist.barrier()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            synchronize(device)
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        t0 = min(e.time_range.start for e in kernels)
        for e in kernels:
            rows.append({"study": "ddp_timeline", "variant": variant, "size": args.size,
                         "global_batch": args.global_batch, "world_size": dist.get_world_size(),
                         "stream": getattr(e, "device_resource_id", -1), "kernel": e.name[:120],
                         "kind": "communication" if "nccl" in e.name.lower() else "compute",
                         "start_ms": (e.time_range.start - t0) / 1e3, "duration_ms": (e.time_range.end - e.time_range.start) / 1e3,
                         "status": "ok", "note": "", **env})
        step = prof = kernels = None
        free_memory(device)
    return rows


EXPERIMENTS = {"train": train_rows, "sharding": sharding_rows, "timeline": timeline_rows}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", choices=list(EXPERIMENTS))
    p.add_argument("--size", default="xl")
    p.add_argument("--context-length", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=4)
    p.add_argument("--variants", default=",".join(VARIANTS), type=lambda s: s.split(","))
    p.add_argument("--optimizer", default="lmperf")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    use_nccl = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_nccl else torch.device("cpu")
    if use_nccl:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_nccl else "gloo", device_id=device if use_nccl else None)
    try:
        env = {**fingerprint(device), "backend": dist.get_backend()}
        rows = EXPERIMENTS[args.experiment](args, device, env)
        if rank == 0:
            write_rows(rows, args.out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
