"""Data-parallel training on N ranks: step time, backward time and exposed communication per DDP
variant, optimizer state sharding's memory and time, and a kernel timeline of naive vs overlapped DDP.

Run under torchrun, one process per rank: with ``--device cuda`` NCCL, one GPU each (fewer GPUs
visible than ranks: one skipped row saying so), with ``--device cpu`` gloo on CPU processes, with
``auto`` NCCL where there are enough GPUs and gloo otherwise:

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m lmperf.studies.ddp train \\
        --size xl --context-length 128 --global-batch 4 --out results/ddp/train-n2-b4.csv
    ... -m lmperf.studies.ddp sharding --size xl --global-batch 4 --out results/ddp/sharding-n2.csv
    ... -m lmperf.studies.ddp timeline --size xl --global-batch 4 --out results/ddp/timeline-n2.csv

**Train.** torch's DDP is the anchor. Each other variant (``local``, the same step with no gradient
synchronization, is the compute-only baseline) runs on its own freshly built model (same seed)
beside a torch DDP model built once, and the two steps are timed interleaved, A B A B, in one
process: at least ``--steps`` rounds, then more until the paired CI of the ratio variant / torch DDP
excludes 1 or ``--max-seconds`` are spent; all ranks stop together. A step's time is its slowest
rank's. Per step, CUDA events time backward and the wait for the gradient all-reduce after it
(``sync``), so "backward runs slower beside NCCL" is measured, not inferred; the host clock times
what our wrappers' gradient hooks spend launching all-reduces and filling buckets
(``hook_times_ms``). Rows carry every step's time, so the report can bootstrap any difference
(exposed communication = step − local).
Two variants all-reduce in bf16, half the bytes: ``bucketed-25-bf16`` (ours, in torch DDP's default
25 MB buckets, so against torch's hook only the implementation differs) and ``torch_ddp-bf16``
(torch DDP with torch's ``bf16_compress_hook``).

**Sharding.** The train step with torch.optim.AdamW, unsharded and sharded (ShardedOptimizer), each
adaptive: the step and the optimizer step alone with their CIs, the sharded optimizer's local update
and its parameter broadcasts apart, and the allocator's memory at the handout's three points.

**Timeline.** torch.profiler's CUDA kernel trace of one step per variant on rank 0, beside the
same step's untraced median, so the figure can say what tracing costs.
"""

import argparse
import logging
import os
from contextlib import contextmanager, nullcontext

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

from lmperf import grid
from lmperf.distributed import DDPBucketed, DDPFlat, DDPIndividualParameters, DDPNaive, ShardedOptimizer
from lmperf.distributed.ddp import BF16, bucketed_settings
from lmperf.distributed.ranks import all_agree, slowest_rank
from lmperf.measure import (
    Budget,
    PhaseClock,
    fingerprint,
    free_memory,
    measure,
    ratio_ci,
    resolved,
    summarize_ms,
    synchronize,
    time_once,
    write_rows,
)
from lmperf.measure.stats import join_ms
from lmperf.model import count_parameters, make_optimizer
from lmperf.studies import run_study
from lmperf.training import build_model, make_step

log = logging.getLogger(__name__)

VARIANTS = grid.DDP_VARIANTS
ANCHOR = "torch_ddp"
PROFILER = "torch.profiler (CUDA activity)"


def wrap(variant: str, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The model wrapped as ``variant`` (lmperf.grid.DDP_VARIANTS): ``bucketed-<MB>[-bf16]`` is ours with
    buckets of that size (all-reduced in bf16 with the suffix); ``torch_ddp-bf16`` is torch's DDP with
    torch's own ``bf16_compress_hook``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown DDP variant {variant!r}; choose from {', '.join(VARIANTS)}")
    if variant == "local":
        return model
    if variant == "naive":
        return DDPNaive(model)
    if variant == "flat":
        return DDPFlat(model)
    if variant == "individual":
        return DDPIndividualParameters(model)
    if variant.startswith("bucketed-"):
        return DDPBucketed(model, *bucketed_settings(variant))
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    if variant == ANCHOR + BF16:
        ddp.register_comm_hook(None, bf16_compress_hook if device.type == "cuda" else gloo_bf16_compress_hook)
    return ddp


def gloo_bf16_compress_hook(process_group, bucket):
    """torch's ``bf16_compress_hook``, unchanged, for CPU ranks: DDP refuses to register the hook by that
    name without CUDA and NCCL 2.10+ (NCCL's bf16 all-reduce), but gloo all-reduces bf16 too."""
    return bf16_compress_hook(process_group, bucket)


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


class VariantStep:
    """A fresh model (same seed every time) wrapped as ``variant``, its optimizer, and its train step
    with a clock on backward and on the wait for gradient synchronization after it."""

    def __init__(self, variant: str, args, device: torch.device, optimizer: str | None = None):
        self.model = build_model(args.size, args.context_length, device)
        self.ddp = wrap(variant, self.model, device)
        self.optimizer = make_optimizer(optimizer or args.optimizer, self.model.parameters())
        batch = Batch(self.model.cfg.vocab_size, args.global_batch, args.context_length, device)
        self.clock = PhaseClock(device)
        self.hook_seconds: list[float] = []  # per step: host time in our wrappers' gradient hooks
        finish = getattr(self.ddp, "finish_gradient_synchronization", None)

        def sync():
            with self.clock("sync"):
                finish()
            self.hook_seconds.append(self.ddp.hook_seconds)
            self.ddp.hook_seconds = 0.0

        def phase(name: str):
            return self.clock(name) if name == "backward" else nullcontext()

        self.step = make_step(
            "train_step",
            self.ddp,
            self.optimizer,
            batch.inputs,
            batch.targets,
            "fp32",
            device,
            phase=phase,
            after_backward=sync if finish is not None else None,
        )


def settled_against_anchor(variant: str):
    """Stop once the paired CI of variant / torch DDP excludes 1 (the difference is resolved)."""

    def settled(timings) -> bool:
        _, low, high = ratio_ci(timings[variant].host_s, timings[ANCHOR].host_s, resamples=500)
        return resolved(low, high)

    return settled


def train_rows(args, device: torch.device, env: dict) -> list[dict]:
    """Every variant timed interleaved with torch DDP; one row per variant. Torch DDP's own row
    comes from its first pairing; every other row carries the anchor's times of its own pairing."""
    budget = Budget(args.steps, max_seconds=args.max_seconds)
    base = {
        "study": "ddp_train",
        "size": args.size,
        "context_length": args.context_length,
        "global_batch": args.global_batch,
        "world_size": dist.get_world_size(),
        "warmup": args.warmup,
        "min_steps": args.steps,
        "max_seconds": args.max_seconds,
    }
    anchor = VariantStep(ANCHOR, args, device)
    params = count_parameters(anchor.model)
    rows = []

    def measured(variant: str, times: list[float], run: VariantStep) -> dict:
        n, clock = len(times), run.clock
        row = {
            **base,
            "variant": variant,
            "params": params,
            "grad_mib": params * 4 / 2**20,
            **summarize_ms(times),
            "step_times_ms": join_ms(times),
            "status": "ok",
            "note": "",
            "backward_times_ms": join_ms(slowest_rank(clock.seconds("backward", n))),
        }
        if "sync" in clock.samples:
            row["sync_times_ms"] = join_ms(slowest_rank(clock.seconds("sync", n)))
            row["hook_times_ms"] = join_ms(slowest_rank(run.hook_seconds[-n:]))
        return row

    for variant in [v for v in args.variants if v != ANCHOR] or [None]:
        try:
            other = VariantStep(variant, args, device) if variant else None
            steps = {ANCHOR: anchor.step, **({variant: other.step} if other else {})}
            timings = measure(
                steps,
                device,
                args.warmup,
                budget,
                agree=all_agree,
                settled=settled_against_anchor(variant) if other else None,
            )
            theirs = slowest_rank(timings[ANCHOR].host_s)
            if not rows:
                rows.append({**measured(ANCHOR, theirs, anchor), "vs_anchor": 1.0, **env})
            if other is None:
                break
            mine = slowest_rank(timings[variant].host_s)
            ratio, low, high = ratio_ci(mine, theirs)
            row = {
                **measured(variant, mine, other),
                "anchor_step_times_ms": join_ms(theirs),
                "vs_anchor": ratio,
                "vs_anchor_ci95_low": low,
                "vs_anchor_ci95_high": high,
                "vs_anchor_resolved": resolved(low, high),
            }
            if variant.startswith("bucketed-"):
                row["buckets"] = len(other.ddp.buckets)
        except torch.OutOfMemoryError as error:
            row = {**base, "variant": variant, "status": "oom", "note": str(error).splitlines()[0]}
        if dist.get_rank() == 0:
            log.info(
                f"{variant:>14} {row['status']} step {row.get('median_ms', float('nan')):9.2f} ms "
                f"(n={row.get('n_steps', 0)}) vs {ANCHOR} {row.get('vs_anchor', float('nan')):.3f} "
                f"[{row.get('vs_anchor_ci95_low', float('nan')):.3f}, "
                f"{row.get('vs_anchor_ci95_high', float('nan')):.3f}]"
            )
        rows.append({**row, **env})
        other = steps = timings = None
        free_memory(device)
    return rows


def sharding_rows(args, device: torch.device, env: dict) -> list[dict]:
    """Time and memory of the train step with and without sharding AdamW's state.

    Gradients are synchronized by DDPIndividualParameters, which keeps no buffers of its own, so the
    only difference between the two runs is where the optimizer state lives. The optimizer step is
    timed alone; the sharded one splits into the local update of this rank's shard and the
    parameter broadcasts (optimizer step − local update).
    """
    if device.type != "cuda":
        return [
            {
                "study": "ddp_sharding",
                "world_size": dist.get_world_size(),
                "status": "skipped",
                "note": "memory accounting needs CUDA allocator stats",
                **env,
            }
        ]
    rows = []
    for sharded in (False, True):
        torch.cuda.reset_peak_memory_stats(device)
        model = build_model(args.size, args.context_length, device)
        after_build = torch.cuda.max_memory_allocated(device)
        ddp = DDPIndividualParameters(model)
        optimizer = (
            ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-4)
            if sharded
            else torch.optim.AdamW(model.parameters(), lr=1e-4)
        )
        local = optimizer.local_optimizer if sharded else optimizer
        clock, readings = PhaseClock(device), {}
        if sharded and local is not None:  # the shard's own update, timed inside the sharded step
            local_step = local.step

            def timed_local_step(*a, **k):
                with clock("local update"):
                    return local_step(*a, **k)

            local.step = timed_local_step

        @contextmanager
        def phase(name):  # allocator readings around the optimizer step, and its time
            if name != "optimizer step":
                yield
                return
            synchronize(device)
            readings.update(
                before_step=torch.cuda.memory_allocated(device),
                peak_before_step=torch.cuda.max_memory_allocated(device),
            )
            torch.cuda.reset_peak_memory_stats(device)
            with clock(name):
                yield
            synchronize(device)
            readings.update(
                after_step=torch.cuda.memory_allocated(device), peak_during_step=torch.cuda.max_memory_allocated(device)
            )
            torch.cuda.reset_peak_memory_stats(device)  # the next peak_before_step covers forward + backward only

        batch = Batch(model.cfg.vocab_size, args.global_batch, args.context_length, device)
        step = make_step(
            "train_step",
            ddp,
            optimizer,
            batch.inputs,
            batch.targets,
            "fp32",
            device,
            phase=phase,
            after_backward=ddp.finish_gradient_synchronization,
        )
        times = measure(
            {"step": step}, device, args.warmup, Budget(args.steps, max_seconds=args.max_seconds), agree=all_agree
        )["step"].host_s
        n = len(times)
        optimizer_s = slowest_rank(clock.seconds("optimizer step", n))
        row = {
            "study": "ddp_sharding",
            "sharded": sharded,
            "size": args.size,
            "context_length": args.context_length,
            "global_batch": args.global_batch,
            "world_size": dist.get_world_size(),
            "optimizer": "torch.optim.AdamW",
            **summarize_ms(slowest_rank(times)),
            **summarize_ms(optimizer_s, prefix="optimizer_"),
        }
        if sharded:
            local_s = slowest_rank(clock.seconds("local update", n)) if "local update" in clock.samples else [0.0] * n
            row.update(
                **summarize_ms(local_s, prefix="local_update_"),
                **summarize_ms([o - u for o, u in zip(optimizer_s, local_s)], prefix="broadcast_"),
            )
        params = list(model.parameters())
        state_bytes = sum(
            t.numel() * t.element_size()
            for s in (local.state.values() if local else [])
            for t in s.values()
            if torch.is_tensor(t) and t.dim() > 0
        )
        param_bytes = sum(p.numel() * p.element_size() for p in params)
        mib = 1 / 2**20
        row.update(
            {
                "params": sum(p.numel() for p in params),
                "param_mib": param_bytes * mib,
                "grad_mib": param_bytes * mib,
                "optimizer_state_mib": state_bytes * mib,
                "peak_after_build_mib": after_build * mib,
                "allocated_before_step_mib": readings["before_step"] * mib,
                "peak_before_step_mib": readings["peak_before_step"] * mib,
                "allocated_after_step_mib": readings["after_step"] * mib,
                "peak_during_step_mib": readings["peak_during_step"] * mib,
                "status": "ok",
                "note": "",
                **env,
            }
        )
        rows.append(row)
        model = ddp = optimizer = local = params = step = None
        free_memory(device)
    return rows


def timeline_rows(args, device: torch.device, env: dict) -> list[dict]:
    """GPU kernels of one training step per variant, from torch.profiler, on rank 0's GPU, with the
    traced step's wall time beside the untraced median of the same step."""
    if device.type != "cuda":
        return [
            {
                "study": "ddp_timeline",
                "world_size": dist.get_world_size(),
                "status": "skipped",
                "note": "a kernel timeline needs CUDA",
                **env,
            }
        ]
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for variant in args.variants:
        run = VariantStep(variant, args, device)
        untraced = measure(
            {variant: run.step}, device, args.warmup, Budget(args.steps, max_steps=args.steps), agree=all_agree
        )[variant].host_s
        synchronize(device)
        dist.barrier()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            traced = time_once(run.step, device)[0]
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        t0 = min(e.time_range.start for e in kernels)
        common = {
            "study": "ddp_timeline",
            "variant": variant,
            "size": args.size,
            "global_batch": args.global_batch,
            "world_size": dist.get_world_size(),
            "profiler": PROFILER,
            "traced_step_ms": traced * 1e3,
            "untraced_step_ms": summarize_ms(untraced)["median_ms"],
        }
        for e in kernels:
            rows.append(
                {
                    **common,
                    "stream": getattr(e, "device_resource_id", -1),
                    "kernel": e.name[:120],
                    "kind": "communication" if "nccl" in e.name.lower() else "compute",
                    "start_ms": (e.time_range.start - t0) / 1e3,
                    "duration_ms": (e.time_range.end - e.time_range.start) / 1e3,
                    "status": "ok",
                    "note": "",
                    **env,
                }
            )
        run = prof = kernels = None
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
    p.add_argument("--steps", type=int, default=10, help="measured steps at least")
    p.add_argument("--max-seconds", type=float, default=30.0, help="measuring time per comparison, at most")
    p.add_argument(
        "--device",
        choices=["auto", "cuda", "cpu"],
        default="auto",
        help="cuda: NCCL, a GPU per rank (fewer visible: a skipped row); cpu: gloo; auto: cuda where enough GPUs",
    )
    p.add_argument(
        "--bucket-model-factor",
        type=float,
        default=2.0,
        help="train rows' target: measured / predicted exposed communication within this factor",
    )
    p.add_argument(
        "--sharding-saved-share",
        type=float,
        default=0.9,
        help="sharding rows' target: memory saved at least this share of the optimizer state removed",
    )
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    return args


def targets(args) -> dict:
    """The targets the report checks an experiment's rows against, written onto them."""
    return {
        "train": {"bucket_model_factor": args.bucket_model_factor},
        "sharding": {"sharding_saved_share": args.sharding_saved_share},
    }.get(args.experiment, {})


def ranks_short(args, world: int) -> dict | None:
    """The skipped row of a run on CUDA that needs more GPUs than are visible (one per rank); None
    where the ranks have what they need."""
    visible = torch.cuda.device_count()
    if args.device != "cuda" or visible >= world:
        return None
    return {
        "study": f"ddp_{args.experiment}",
        "size": args.size,
        "context_length": args.context_length,
        "global_batch": args.global_batch,
        "world_size": world,
        "backend": "nccl",
        "status": "skipped",
        "note": f"needs {world} GPUs, {visible} visible",
        **targets(args),
        **fingerprint(torch.device("cpu")),
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    skipped = ranks_short(args, world)
    if skipped is not None:  # not enough GPUs: a row saying so, not a failure
        if rank == 0:
            write_rows([skipped], args.out)
        return
    use_nccl = args.device != "cpu" and torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_nccl else torch.device("cpu")
    if use_nccl:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_nccl else "gloo", device_id=device if use_nccl else None)
    try:
        env = {**fingerprint(device), "backend": dist.get_backend(), **targets(args)}
        rows = EXPERIMENTS[args.experiment](args, device, env)
        if rank == 0:
            write_rows(rows, args.out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    run_study(main)
