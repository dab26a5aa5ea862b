"""The roofline ladder: the handout's train step, then one technique added at a time.

Each rung of ``RUNGS`` adds one technique to the rung before it; two more are measured beside the
ladder: torch's fused AdamW in place of ours, and the "torch stack" a user gets without lmperf
(whole-model torch.compile, SDPA, torch's fused AdamW), the anchor. All rungs of one (size,
context) point run in one process, on one model, launched interleaved A B C ...
(``lmperf.measure.timing``), then each replayed as a CUDA graph, one rung at a time (graphs of
two 2.7B steps do not fit beside each other), with the e2e harness's statistics.

One model serves every rung: its blocks are compiled once, and eager rungs run them under
``torch.compiler.set_stance("force_eager")``; the torch stack calls a whole-model compile of the
same modules. The three AdamWs share one set of state tensors (t, m, v): three copies would not fit
beside a 2.7B model on 80 GB.

Per rung: step median (CI), tokens/s, MFU of the step and of forward+backward against the bf16
dense peak (one peak for every rung, so MFU ranks rungs as their speed does), the split into
forward, backward and optimizer (CUDA events), the optimizer's GB/s against its 28 B/param bound at
the HBM bandwidth measured in this process, and peak memory. ``--check-steps N`` proves the rungs
compute the same thing: from the same initial weights and batch, each rung trains N steps, then one
fp32 eager forward gives its loss (``initial_loss`` beside it shows that training moved it).

    python -m lmperf.studies.ladder --size small --context-length 512 --out results/ladder/small/ctx512.csv
"""

import argparse
import statistics
from dataclasses import dataclass

import torch

from lmperf.measure import Budget, GraphUnavailable, PhaseClock, capture_graph, free_memory, measure, resolve_device
from lmperf.measure.env import fingerprint
from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM, peak_tflops, step_flops
from lmperf.measure.harness import graphed_columns, launched_columns, steady_peak_gib
from lmperf.measure.rows import write_rows
from lmperf.model import SIZES, count_parameters, cross_entropy, make_optimizer
from lmperf.training import build_model, compile_blocks, make_step, random_batch, use_attention


@dataclass(frozen=True)
class Rung:
    name: str
    adds: str  # the technique, for the report
    precision: str = "bf16"
    compile: str = "blocks"  # eager | blocks (each Transformer block) | model (the whole model)
    attention: str = "flash_triton"
    optimizer: str = "lmperf_fused"
    graphed: bool = False  # the whole step replayed as a CUDA graph
    on_ladder: bool = True  # False: measured beside the ladder

    @property
    def gpu_only(self) -> str:
        """Why this rung needs a CUDA GPU ('' if it runs anywhere)."""
        if self.attention == "flash_triton" or self.optimizer == "lmperf_fused":
            return "Triton kernels need a CUDA GPU"
        return "CUDA graphs need a CUDA GPU" if self.graphed else ""


RUNGS = (
    Rung("baseline", "the handout: fp32, eager, naive attention, lmperf AdamW", "fp32", "eager", "naive", "lmperf"),
    Rung("bf16", "+ bf16 autocast", compile="eager", attention="naive", optimizer="lmperf"),
    Rung("compile", "+ torch.compile per block", attention="naive", optimizer="lmperf"),
    Rung("flash", "+ our FlashAttention (Triton)", optimizer="lmperf"),
    Rung("fused_adamw", "+ our fused AdamW (Triton)"),
    Rung("cuda_graph", "+ the whole step as a CUDA graph", graphed=True),
    Rung("torch_fused_adamw", "rung fused_adamw with torch's fused AdamW", optimizer="torch_fused", on_ladder=False),
    Rung(
        "torch_stack",
        "whole-model torch.compile + SDPA + torch's fused AdamW",
        compile="model",
        attention="sdpa",
        optimizer="torch_fused",
        on_ladder=False,
    ),
)

PHASES = {"forward": "forward_ms", "backward": "backward_ms", "optimizer step": "optimizer_ms"}  # make_step's names


def share_state(source: torch.optim.Optimizer, target: torch.optim.Optimizer) -> None:
    """Make ``target`` update ``source``'s AdamW state tensors (created now if need be)."""
    for group in source.param_groups:
        for p in group["params"]:
            if not source.state[p]:
                t = torch.zeros((), device=p.device, dtype=torch.float32)
                source.state[p].update(t=t, m=torch.zeros_like(p), v=torch.zeros_like(p))
            s = source.state[p]
            if isinstance(target, torch.optim.AdamW):
                target.state[p] = {"step": s["t"], "exp_avg": s["m"], "exp_avg_sq": s["v"]}
            else:
                target.state[p] = s


def device_rates(device: torch.device) -> dict:
    """HBM bandwidth (a 1 GiB copy, read + write) and the bf16 matmul peak (8192³), measured here."""
    if device.type != "cuda":
        return {"hbm_gbps": float("nan"), "matmul_tflops": float("nan")}
    rates = {
        "hbm_gbps": 2 * 2**30 / _bench_ms(lambda src, dst: dst.copy_(src), [(2**28,)] * 2, torch.float32, device) / 1e6,
        "matmul_tflops": 2 * 8192**3 / _bench_ms(torch.matmul, [(8192, 8192)] * 2, torch.bfloat16, device) / 1e9,
    }
    free_memory(device)
    return rates


def _bench_ms(function, shapes, dtype, device) -> float:
    """do_bench's median of ``function`` on fresh random tensors of ``shapes``."""
    import triton.testing

    tensors = [torch.randn(shape, dtype=dtype, device=device) for shape in shapes]
    return triton.testing.do_bench(lambda: function(*tensors), warmup=25, rep=200)


class Ladder:
    """One model, its compiled forms and optimizers, and one train step per rung."""

    def __init__(self, size: str, context_length: int, batch_size: int, device: torch.device, rungs=RUNGS):
        self.device, self.rungs = device, rungs
        self.model = build_model(size, context_length, device)
        self.initial = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        compile_blocks(self.model)
        self.whole = torch.compile(self.model, dynamic=False)
        names = {"lmperf"} | {r.optimizer for r in rungs}  # lmperf's AdamW owns the shared state
        self.optimizers = {n: make_optimizer(n, self.model.parameters()) for n in sorted(names)}
        for name, optimizer in self.optimizers.items():
            if name != "lmperf":
                share_state(self.optimizers["lmperf"], optimizer)
        self.tokens, self.targets = random_batch(self.model.cfg.vocab_size, batch_size, context_length, device)
        self.clocks = {r.name: PhaseClock(device) for r in rungs}

    def step(self, rung: Rung, timed_phases: bool = False):
        """The rung's train step; ``timed_phases`` records forward, backward and optimizer times."""
        model = self.whole if rung.compile == "model" else self.model
        kwargs = {"phase": self.clocks[rung.name]} if timed_phases else {}
        optimizer = self.optimizers[rung.optimizer]
        inner = make_step(
            "train_step", model, optimizer, self.tokens, self.targets, rung.precision, self.device, **kwargs
        )
        stance = "force_eager" if rung.compile == "eager" else "default"

        def step():
            with torch.compiler.set_stance(stance):
                inner()

        return step

    def drop_grads(self) -> None:
        """Gradients to None and cached blocks back to the device: a graph's private pool cannot reuse them."""
        self.model.zero_grad(set_to_none=True)
        free_memory(self.device)

    def before(self, name: str) -> None:
        use_attention(self.model, next(r for r in self.rungs if r.name == name).attention)

    def reset(self) -> None:
        """Back to the initial weights and an empty AdamW state, in place (graphs keep their addresses)."""
        with torch.no_grad():
            for key, value in self.model.state_dict().items():
                value.copy_(self.initial[key])
            for s in self.optimizers["lmperf"].state.values():
                for tensor in s.values():
                    tensor.zero_()

    def loss(self) -> float:
        """One fp32 eager forward with naive attention: the same yardstick for every rung."""
        use_attention(self.model, "naive")
        with torch.no_grad(), torch.compiler.set_stance("force_eager"):
            return float(cross_entropy(self.model(self.tokens), self.targets))


def optimizer_graphed_ms(ladder: Ladder, device: torch.device) -> dict[str, float]:
    """Each AdamW's step alone, replayed as a CUDA graph (do_bench median, ms): its GPU time without the
    host's launch gaps, the number to hold against the 28 B/param bound."""
    import triton.testing

    times = {}
    try:
        for p in ladder.model.parameters():
            p.grad = torch.ones_like(p)
    except torch.OutOfMemoryError as error:
        print(f"optimizers alone: no room for the gradients: {str(error).splitlines()[0]}", flush=True)
        ladder.model.zero_grad(set_to_none=True)
        free_memory(device)
        return times
    for name, optimizer in ladder.optimizers.items():
        try:
            replay = capture_graph(optimizer.step, device)
        except GraphUnavailable as reason:
            print(f"optimizer {name}: {reason}", flush=True)
            continue
        times[name] = triton.testing.do_bench(replay, warmup=25, rep=200)
        del replay
    ladder.model.zero_grad(set_to_none=True)
    free_memory(device)
    return times


def run_ladder(
    size: str,
    context_length: int,
    batch_size: int,
    device: torch.device,
    warmup_steps: int,
    budget: Budget,
    check_steps: int = 0,
    rungs=RUNGS,
) -> list[dict]:
    """One row per rung: 'ok', 'oom' or 'skipped' (with the reason in note)."""
    env = fingerprint(device)
    base = {"study": "ladder", "size": size, "context_length": context_length, "batch_size": batch_size, **env}
    rows = {
        r.name: {
            **base,
            "rung": r.name,
            "order": i,
            "adds": r.adds,
            "on_ladder": r.on_ladder,
            "precision": r.precision,
            "compile": r.compile,
            "attention": r.attention,
            "optimizer": r.optimizer,
            "graphed": r.graphed,
            "status": "skipped" if device.type != "cuda" and r.gpu_only else "ok",
            "note": r.gpu_only if device.type != "cuda" else "",
        }
        for i, r in enumerate(rungs)
    }
    live = [r for r in rungs if rows[r.name]["status"] == "ok"]
    rates = device_rates(device)
    try:
        ladder = Ladder(size, context_length, batch_size, device, live)
    except torch.OutOfMemoryError as error:
        for r in live:
            rows[r.name].update(status="oom", note=f"model construction: {str(error).splitlines()[0]}")
        return list(rows.values())
    params = count_parameters(ladder.model)
    resident = torch.cuda.memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    print(f"built {size} ({params:,} parameters) on {device}: {resident:.1f} GiB with AdamW state", flush=True)

    launched = measure(
        {r.name: ladder.step(r, timed_phases=True) for r in live if not r.graphed},
        device,
        warmup_steps,
        budget,
        before=ladder.before,
    )
    for name, timings in launched.items():
        if timings.error is not None:
            rows[name].update(status="oom", note=str(timings.error).splitlines()[0])
            print(f"{name:>18} oom", flush=True)
            continue
        rows[name].update(launched_columns(timings, budget))
        clock = ladder.clocks[name]
        for phase, column in (
            ("forward", "forward_ms"),
            ("backward", "backward_ms"),
            ("optimizer step", "optimizer_ms"),
        ):
            rows[name][column] = 1e3 * statistics.median(clock.seconds(phase, last=len(timings.host_s)))
        ladder.before(name)
        rows[name]["peak_mem_gib"] = steady_peak_gib(ladder.step(next(r for r in live if r.name == name)), device)
        print(
            f"{name:>18} launched {rows[name]['median_ms']:9.2f} ms  peak {rows[name]['peak_mem_gib']:.1f} GiB",
            flush=True,
        )

    ladder.model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        for name, ms in optimizer_graphed_ms(ladder, device).items():
            for r in live:
                if r.optimizer == name:
                    rows[r.name].update(
                        optimizer_graphed_ms=ms, optimizer_graphed_gbps=ADAMW_BYTES_PER_PARAM * params / ms / 1e6
                    )

    if check_steps:
        ladder.reset()
        initial_loss = ladder.loss()

    def check(rung: Rung, step) -> None:
        """Train ``check_steps`` steps of ``step`` from the initial weights; record the loss after."""
        if not check_steps:
            return
        ladder.reset()
        ladder.before(rung.name)
        try:
            for _ in range(check_steps):
                step()
        except torch.OutOfMemoryError as error:
            rows[rung.name]["note"] = f"loss check: {str(error).splitlines()[0]}"
            return
        rows[rung.name].update(check_steps=check_steps, initial_loss=initial_loss, loss_after_check=ladder.loss())

    # One graph at a time: two graphed steps of a 2.7B model do not fit beside each other.
    for r in live:
        if rows[r.name]["status"] != "ok" or not (r.graphed or device.type == "cuda"):
            continue
        ladder.before(r.name)
        try:
            replay = capture_graph(ladder.step(r), device, after_warmup=ladder.drop_grads)
        except GraphUnavailable as reason:
            rows[r.name].update(
                note=str(reason), **({"status": "oom" if "memory" in str(reason) else "skipped"} if r.graphed else {})
            )
            print(f"{r.name:>18} {reason}", flush=True)
            continue
        timings = measure({r.name: replay}, device, 1, budget)[r.name]
        if timings.error is not None:
            rows[r.name].update(note=f"graph replay: {str(timings.error).splitlines()[0]}")
        else:
            if r.graphed:  # the rung is its replay: launched and graphed are one measurement
                rows[r.name].update(launched_columns(timings, budget))
                check(r, replay)
            rows[r.name].update(graphed_columns(timings, rows[r.name]["median_ms"], budget))
            print(f"{r.name:>18} graphed  {rows[r.name]['graphed_median_ms']:9.2f} ms", flush=True)
        del replay
        ladder.drop_grads()
    for r in live:
        if rows[r.name]["status"] == "ok" and not r.graphed:
            check(r, ladder.step(r))

    peak = peak_tflops(env["device_name"], "bf16")
    cfg = ladder.model.cfg
    flops = step_flops(cfg, batch_size, context_length, "train_step")
    for row in rows.values():
        row.update(params=params, **rates)
        if row["status"] == "ok":
            row.update(rates_of(row, flops, peak, batch_size * context_length, params))
    return list(rows.values())


def rates_of(row: dict, flops: float, peak: float | None, tokens: int, params: int) -> dict:
    """Tokens/s and MFU of the step, MFU of forward+backward, the optimizer's GB/s and its bound."""
    peak = peak or float("nan")
    fwd_bwd_ms = row.get("forward_ms", float("nan")) + row.get("backward_ms", float("nan"))
    bound_ms = ADAMW_BYTES_PER_PARAM * params / (row["hbm_gbps"] * 1e9) * 1e3
    return {
        "tokens_per_s": tokens / (row["median_ms"] / 1e3),
        "model_tflop_per_step": flops / 1e12,
        "mfu": flops / (row["median_ms"] / 1e3) / 1e12 / peak,
        "graphed_mfu": flops / (row.get("graphed_median_ms", float("nan")) / 1e3) / 1e12 / peak,
        "fwd_bwd_mfu": flops / (fwd_bwd_ms / 1e3) / 1e12 / peak,
        "optimizer_gbps": ADAMW_BYTES_PER_PARAM * params / (row.get("optimizer_ms", float("nan")) / 1e3) / 1e9,
        "optimizer_bound_ms": bound_ms,
        "peak_tflops": peak,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(SIZES))
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10, help="at least this many, then more until the CI is tight")
    p.add_argument("--ci-halfwidth", type=float, default=0.01)
    p.add_argument("--max-seconds", type=float, default=30.0, help="time budget past --measured-steps, per pass")
    p.add_argument("--check-steps", type=int, default=20, help="train steps per rung for the loss check (0: none)")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    budget = Budget(min_steps=args.measured_steps, rel_halfwidth=args.ci_halfwidth, max_seconds=args.max_seconds)
    device = resolve_device(args.device)
    rows = run_ladder(
        args.size, args.context_length, args.batch_size, device, args.warmup_steps, budget, args.check_steps
    )
    write_rows(rows, args.out)


if __name__ == "__main__":
    main()
