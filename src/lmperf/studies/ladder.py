"""The roofline ladder: the handout's train step, then one technique added at a time.

Each rung of ``RUNGS`` adds one technique to the rung before it; two more are measured beside the
ladder: torch's fused AdamW in place of ours, and the "torch stack" a user gets without lmperf
(whole-model torch.compile, SDPA, torch's fused AdamW), the anchor. All rungs of one (size,
context) point run in one process, on one model, in ``TURNS`` turns (A B C A B C): in each turn a
rung is launched, then replayed as a CUDA graph (a graphed rung only replayed), each block from the
initial weights and held untimed before it is timed (``LadderRun.take_turns`` says why), with the e2e
harness's statistics.

One model serves every rung: its blocks are compiled once, and eager rungs run them under
``torch.compiler.set_stance("force_eager")``; the torch stack calls a whole-model compile of the
same modules. The AdamWs share one set of state tensors (t, m, v): copies would not fit beside a
2.7B model on 80 GB. The in-backward rung runs its AdamW from hooks on the model's parameters
(``lmperf.model.optim_in_backward``), armed during its own steps only. The bf16-weights rung
swaps bf16 copies of the Linear weights into the model; its AdamW holds the fp32 weights as its
masters. The fused-norms rung runs the same modules through ``lmperf.kernels.fused_rmsnorm``'s
``FusedNormsLM``, whose blocks are compiled as the model's are; the fused-loss rung also takes its
loss from ``lmperf.kernels.fused_cross_entropy`` instead of the eager torch ops.

Per rung: the attention kernels that ran (``attention_kernel``: our FlashAttention's are Triton's,
or Gluon's on Hopper where they take the shape), step median (CI), tokens/s, MFU of the step and of
forward+backward against the bf16 dense peak (one peak for every rung, so MFU ranks rungs as their
speed does), the split into forward, backward and optimizer (CUDA events), the optimizer's GB/s
against its 28 B/param bound at the HBM bandwidth measured in this process, peak memory, and the SM
clock and power during its replay (``lmperf.measure.power``). ``--check-steps N`` proves the rungs
compute the same thing: from the same initial weights and batch, each rung trains N steps at
learning rate ``lmperf.model.repeated_batch_lr`` (the rows' ``check_lr``), then one fp32 eager
forward gives its loss (``initial_loss`` beside it shows that training moved it). Every AdamW is
built with that rate: a graph bakes it in, and the update runs the same kernels at any rate.

A point has two parts: ``time_ladder``, the timed turns, then ``check_ladder``, the loss checks and
kernel profiles. ``--part both`` runs them in one process; the pipeline runs ``--part timed``, then
``--part checked`` in a process of its own (on the model built again from the same seed), one job
each, so that each fits a 10-minute slice: at 2.7B, context 512, the two together passed 555 s.

    python -m lmperf.studies.ladder --size small --context-length 512 --out results/ladder/small/ctx512.csv
"""

import argparse
import logging
import statistics
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

import pandas as pd
import torch

from lmperf.attention import attention_kernel, forget_kernels
from lmperf.kernels.fused_cross_entropy import fused_cross_entropy
from lmperf.kernels.fused_rmsnorm import FusedNormsLM
from lmperf.measure import (
    Budget,
    GraphUnavailable,
    PhaseClock,
    capture_graph,
    free_memory,
    release_cached,
    resolve_device,
)
from lmperf.measure.env import fingerprint
from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM, peak_tflops, step_flops
from lmperf.measure.harness import graphed_columns, launched_columns, steady_peak_gib
from lmperf.measure.kernels import categorize
from lmperf.measure.phases import phase
from lmperf.measure.power import SETTLE_RULE, hold, nvidia_smi_id
from lmperf.measure.rows import write_rows
from lmperf.measure.timing import HOST_BOUND
from lmperf.measure.turns import TURNS, pooled, timed_block, turn_columns
from lmperf.model import SIZES, count_parameters, cross_entropy, make_optimizer, repeated_batch_lr
from lmperf.model.optim_in_backward import OptimizerInBackward
from lmperf.model.transformer import Linear
from lmperf.studies import run_study
from lmperf.training import build_model, compile_blocks, make_step, random_batch, use_attention

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rung:
    name: str
    adds: str  # the technique, for the report
    precision: str = "bf16"
    compile: str = "blocks"  # eager | blocks (each Transformer block) | model (the whole model)
    attention: str = "flash_triton"
    optimizer: str = "lmperf_fused"
    graphed: bool = False  # the whole step replayed as a CUDA graph
    weights: str = "fp32"  # the Linear weights the model multiplies by: fp32 (cast by autocast) or bf16
    in_backward: bool = False  # each parameter's update runs as its gradient lands, beside the backward
    norms: str = "inductor"  # inductor (as compiled) | fused (lmperf.kernels.fused_rmsnorm, stream in the norms)
    loss: str = "eager"  # eager (lmperf.model.loss, torch ops) | fused (lmperf.kernels.fused_cross_entropy)
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
    Rung("flash", "+ our FlashAttention", optimizer="lmperf"),  # its rows' attention_kernel: Triton or Gluon
    Rung("fused_adamw", "+ our fused AdamW (Triton)"),
    Rung("cuda_graph", "+ the whole step as a CUDA graph", graphed=True),
    Rung("bf16_weights", "+ bf16 weights, fp32 masters in the fused AdamW: no casts", graphed=True, weights="bf16"),
    Rung(
        "in_backward",
        "+ each parameter's AdamW inside the backward, on a side stream",
        graphed=True,
        weights="bf16",
        in_backward=True,
    ),
    Rung(
        "fused_norms",
        "+ our RMSNorm kernels (Triton): the residual adds in the norms, their gradients in one pass",
        graphed=True,
        weights="bf16",
        in_backward=True,
        norms="fused",
    ),
    Rung(
        "fused_loss",
        "+ our cross-entropy (Triton): one pass over the logits forward, one backward",
        graphed=True,
        weights="bf16",
        in_backward=True,
        norms="fused",
        loss="fused",
    ),
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

PARTS = ("both", "timed", "checked")  # a point in one process, or in two (``main``'s --part)

PHASES = {"forward": "forward_ms", "backward": "backward_ms", "optimizer step": "optimizer_ms"}  # make_step's names


def share_state(source: torch.optim.Optimizer, target: torch.optim.Optimizer) -> None:
    """Make ``target`` update ``source``'s AdamW state tensors (created now if need be).

    The two hold the same parameters in the same order; where target's is a bf16 copy of source's
    fp32 parameter, that fp32 parameter becomes target's master weights.
    """
    for group, other in zip(source.param_groups, target.param_groups, strict=True):
        for p, q in zip(group["params"], other["params"], strict=True):
            s = source.state_of(p)
            if isinstance(target, torch.optim.AdamW):
                target.state[q] = {"step": s["t"], "exp_avg": s["m"], "exp_avg_sq": s["v"]}
            else:
                target.state[q] = s if q is p else {**s, "master": p.detach()}


def host_copy(state: dict[str, torch.Tensor], pinned: bool) -> dict[str, torch.Tensor]:
    """A copy of ``state`` in host memory, page-locked if ``pinned``: every timed block starts by copying
    it back, 13.6 GB at 2.7B, which took 1.62 s from pageable memory and 0.25 s from pinned on an H200
    (notes/one-allocation.md, "The ladder's reset from pinned memory"). The price is host memory that
    cannot be swapped out: torch's pinned allocator rounds each tensor up to a power of two, 17.4 GB
    at 2.7B."""
    return {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=pinned).copy_(v) for k, v in state.items()}


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

    OWNER = ("lmperf", "fp32")  # lmperf's AdamW on the fp32 weights owns the shared state

    def __init__(self, size: str, context_length: int, batch_size: int, device: torch.device, rungs=RUNGS):
        self.device, self.rungs = device, {r.name: r for r in rungs}
        self.model = build_model(size, context_length, device)
        self.lr = repeated_batch_lr(self.model.cfg.d_model)
        self.initial = host_copy(self.model.state_dict(), pinned=device.type == "cuda")
        compile_blocks(self.model)
        self.whole = torch.compile(self.model, dynamic=False)
        self.fused_norms = FusedNormsLM(self.model)
        compile_blocks(self.fused_norms)
        self.linears = [m for m in self.model.modules() if isinstance(m, Linear)]
        self.weights = {"fp32": [m.weight for m in self.linears]}
        self.optimizers = {self.OWNER: make_optimizer("lmperf", self.model.parameters(), lr=self.lr)}
        self.in_backward = {}  # (name, weights): that AdamW run from the backward's hooks
        for r in rungs:
            if r.weights == "fp32":
                self.optimizer(r.optimizer, r.weights)
        self.tokens, self.targets = random_batch(self.model.cfg.vocab_size, batch_size, context_length, device)
        self.clocks = {r.name: PhaseClock(device) for r in rungs}

    def use_weights(self, dtype: str) -> None:
        """Point every Linear at its fp32 weight or at its bf16 copy; drop the other set's gradients.

        The bf16 copies are made on first use and kept until ``drop_bf16``: only while a bf16 rung runs,
        as the most memory-hungry rung of a 2.7B model has no room for them.
        """
        if dtype not in self.weights:
            self.weights[dtype] = [torch.nn.Parameter(w.detach().to(torch.bfloat16)) for w in self.weights["fp32"]]
        for linear, weight in zip(self.linears, self.weights[dtype], strict=True):
            linear.weight = weight
        for other, weights in self.weights.items():
            if other != dtype:
                for weight in weights:
                    weight.grad = None

    def optimizer(self, name: str, weights: str) -> torch.optim.Optimizer:
        """AdamW ``name`` over the model with ``weights``, on the shared state (made on first use)."""
        if (name, weights) not in self.optimizers:
            self.use_weights(weights)
            self.optimizers[name, weights] = make_optimizer(name, self.model.parameters(), lr=self.lr)
            share_state(self.optimizers[self.OWNER], self.optimizers[name, weights])
        return self.optimizers[name, weights]

    def drop_bf16(self) -> None:
        """Free the bf16 weight copies and the AdamW that updates them (no graph may still use them)."""
        self.use_weights("fp32")
        self.weights.pop("bf16", None)
        self.optimizers = {key: o for key, o in self.optimizers.items() if key[1] == "fp32"}
        for key in [key for key in self.in_backward if key[1] != "fp32"]:
            self.in_backward.pop(key).remove()
        free_memory(self.device)

    def step(self, rung: Rung, timed_phases: bool = False):
        """The rung's train step; ``timed_phases`` records forward, backward and optimizer times."""
        model = self.whole if rung.compile == "model" else self.fused_norms if rung.norms == "fused" else self.model
        kwargs = {"phase": self.clocks[rung.name]} if timed_phases else {}
        optimizer = self.optimizer(rung.optimizer, rung.weights)
        if rung.in_backward:
            key = (rung.optimizer, rung.weights)
            if key not in self.in_backward:
                self.in_backward[key] = OptimizerInBackward(optimizer)
            optimizer = self.in_backward[key]
        if rung.loss == "fused":
            kwargs["loss_fn"] = fused_cross_entropy
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
        release_cached(self.device)

    def before(self, name: str) -> None:
        """Set the shared model up for rung ``name``: its attention and its weights."""
        use_attention(self.model, self.rungs[name].attention)
        self.use_weights(self.rungs[name].weights)

    def reset(self) -> None:
        """Back to the initial weights and an empty AdamW state, in place (graphs keep their addresses)."""
        self.use_weights("fp32")
        with torch.no_grad():
            for key, value in self.model.state_dict().items():
                value.copy_(self.initial[key], non_blocking=True)  # pinned and never written: safe to overlap
            for fp32, bf16 in zip(*self.weights.values()) if "bf16" in self.weights else ():
                bf16.copy_(fp32)
        self.empty_state()

    def empty_state(self) -> None:
        """Zero the shared AdamW state (t, m, v) in place; the weights stay."""
        for state in self.optimizers[self.OWNER].state.values():
            for tensor in state.values():
                tensor.zero_()

    def start(self, name: str) -> None:
        """Back to the initial weights and an empty AdamW state, set up for rung ``name``: where every
        timed block, capture and loss check begins, so that no rung inherits what another left."""
        self.reset()
        self.before(name)

    def loss(self) -> float:
        """One fp32 eager forward with naive attention on the fp32 weights (the masters): the same
        yardstick for every rung."""
        use_attention(self.model, "naive")
        self.use_weights("fp32")
        with torch.no_grad(), torch.compiler.set_stance("force_eager"):
            return float(cross_entropy(self.model(self.tokens), self.targets))


def optimizer_graphed_ms(ladder: Ladder, device: torch.device) -> dict[str, float]:
    """Each AdamW's step alone, replayed as a CUDA graph (do_bench median, ms): its GPU time without the
    host's launch gaps, the number to hold against the 28 B/param bound. It steps the model's own
    weights and state with gradients of ones, which wrecks the model (notes/ladder-power.md), so it
    puts the initial weights and an empty state back."""
    import triton.testing

    times = {}
    for r in ladder.rungs.values():
        ladder.optimizer(r.optimizer, r.weights)
    ladder.use_weights("fp32")
    params = {id(p): p for o in ladder.optimizers.values() for g in o.param_groups for p in g["params"]}.values()

    def drop_grads():
        for p in params:
            p.grad = None
        release_cached(device)

    try:
        for p in params:
            p.grad = torch.ones_like(p)
    except torch.OutOfMemoryError as error:
        log.warning(f"optimizers alone: no room for the gradients: {str(error).splitlines()[0]}")
        drop_grads()
        free_memory(device)  # an error's traceback may hold tensors in a cycle
        return times
    for key, optimizer in ladder.optimizers.items():
        try:
            replay = capture_graph(optimizer.step, device)
        except GraphUnavailable as reason:
            log.info(f"optimizer {key}: {reason}")
            continue
        times[key] = triton.testing.do_bench(replay, warmup=25, rep=200)
        del replay
    drop_grads()
    ladder.drop_bf16()
    ladder.reset()
    return times


class Point(NamedTuple):
    """One (size, context) of the grid, at a batch size, on a device: what each part of the study runs."""

    size: str
    context_length: int
    batch_size: int
    device: torch.device

    def base(self) -> dict:
        """The columns every row of the point carries: the study, the point and the machine."""
        where = {key: value for key, value in self._asdict().items() if key != "device"}
        return {"study": "ladder", **where, **fingerprint(self.device)}


def run_ladder(
    point: Point,
    warmup_steps: int,
    budget: Budget,
    check_steps: int = 0,
    rungs=RUNGS,
    kernels_out: str | None = None,
    settle_seconds: float = 0.0,
) -> list[dict]:
    """One row per rung: 'ok', 'oom' or 'skipped' (with the reason in note), both parts of the point in
    one process: ``time_ladder``, then ``check_ladder`` (the kernels to ``kernels_out``)."""
    rows, ladder = time_ladder(point, warmup_steps, budget, rungs, settle_seconds)
    check_ladder(ladder, rows, point.base(), check_steps, settle_seconds, kernels_out)
    return list(rows.values())


def time_ladder(
    point: Point, warmup_steps: int, budget: Budget, rungs=RUNGS, settle_seconds: float = 0.0
) -> tuple[dict[str, dict], Ladder | None]:
    """The point's first part: every rung's timed turns on one model, and the rates they give. Returns
    the rows by rung, and the Ladder (None when the model did not fit: every live row is then 'oom')."""
    size, context_length, batch_size, device = point
    base = point.base()
    settings = {"ci_halfwidth": budget.rel_halfwidth, "host_bound_threshold": HOST_BOUND}
    settings |= {"settle_seconds": settle_seconds, **SETTLE_RULE}
    rows = {r.name: {**first_row(r, i, base, device), **settings} for i, r in enumerate(rungs)}
    live = [r for r in rungs if rows[r.name]["status"] == "ok"]
    rates = device_rates(device)
    try:
        ladder = Ladder(*point, live)
    except torch.OutOfMemoryError as error:
        for r in live:
            rows[r.name].update(status="oom", note=f"model construction: {str(error).splitlines()[0]}")
        return rows, None
    params = count_parameters(ladder.model)
    resident = torch.cuda.memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    log.info(f"built {size} ({params:,} parameters) on {device}: {resident:.1f} GiB with AdamW state")

    if device.type == "cuda":
        for key, ms in optimizer_graphed_ms(ladder, device).items():
            for r in live:
                if (r.optimizer, r.weights) == key:
                    rows[r.name].update(
                        optimizer_graphed_ms=ms, optimizer_graphed_gbps=ADAMW_BYTES_PER_PARAM * params / ms / 1e6
                    )

    run = LadderRun(ladder, rows, settle_seconds)
    launched, replayed, phases = run.take_turns(live, warmup_steps, budget)
    for r in live:
        if run.ok(r):
            run.record(r, launched.get(r.name), replayed.get(r.name), phases.get(r.name), budget)

    peak = peak_tflops(base["device_name"], "bf16")
    flops = step_flops(ladder.model.cfg, batch_size, context_length, "train_step")
    for row in rows.values():
        row.update(params=params, **rates)
        if row["status"] == "ok":
            row.update(rates_of(row, flops, peak, batch_size * context_length, params))
    return rows, ladder


def check_ladder(
    ladder: Ladder | None,
    rows: dict[str, dict],
    base: dict,
    check_steps: int,
    settle_seconds: float = 0.0,
    kernels_out: str | None = None,
) -> None:
    """The point's second part, after every timed block (a profile or a check may disturb the clock):
    each rung still 'ok' in ``rows`` trains ``check_steps`` steps for its loss check, and with
    ``kernels_out`` its GPU time per kernel is written there (``base``'s columns on every row): a
    graphed rung's in its replay, the others' launched. No ``ladder``: no rung ran (the model did not
    fit, or every rung needs a GPU), and the kernels file says so."""
    if ladder is None:
        if kernels_out:
            write_rows([{**base, "status": "skipped", "note": "no rung ran"}], kernels_out, cost=False)
        return
    run = LadderRun(ladder, rows, settle_seconds, check_steps)
    live = [r for r in ladder.rungs.values() if run.ok(r)]
    profiles = run.profile_and_check_graphed(live, profile=bool(kernels_out))
    for r in live:
        if run.ok(r) and not r.graphed:
            run.check(r, ladder.step(r))
    if kernels_out:
        ran = [r for r in live if run.ok(r)]
        if ladder.device.type == "cuda":
            kernels = pd.concat([profiles[r.name] if r.name in profiles else run.profile_launched(r) for r in ran])
        else:
            kernels = pd.DataFrame(
                {"rung": [r.name for r in ran], "status": "skipped", "note": "kernel times need a CUDA GPU"}
            )
        write_rows(kernels.assign(**base).to_dict("records"), kernels_out, cost=False)


def first_row(rung: Rung, order: int, base: dict, device: torch.device) -> dict:
    """A rung's row before it runs: its recipe, and 'skipped' with the reason where it needs a GPU
    that ``device`` is not."""
    skipped = device.type != "cuda" and rung.gpu_only
    recipe = {f.name: getattr(rung, f.name) for f in fields(Rung) if f.name != "name"}
    return {
        **base,
        "rung": rung.name,
        "order": order,
        **recipe,
        "status": "skipped" if skipped else "ok",
        "note": rung.gpu_only if device.type != "cuda" else "",
    }


class LadderRun:
    """One point's rungs on one ``Ladder``, filling their ``rows``: the timed turns, then the kernel
    profiles and loss checks, which may disturb the clock and so come after every timed block."""

    def __init__(self, ladder: Ladder, rows: dict[str, dict], settle_seconds: float, check_steps: int = 0):
        self.ladder, self.rows, self.device = ladder, rows, ladder.device
        self.settle_seconds, self.check_steps = settle_seconds, check_steps
        self.initial_loss = float("nan")
        if check_steps:
            ladder.reset()
            self.initial_loss = ladder.loss()

    def ok(self, r: Rung) -> bool:
        return self.rows[r.name]["status"] == "ok"

    def take_turns(self, live: list[Rung], warmup_steps: int, budget: Budget) -> tuple[dict, dict, dict]:
        """Every rung in ``TURNS`` turns, A B C A B C, each in blocks of its own: from the initial
        weights, held untimed until steady (at most ``settle_seconds``), then timed while the SM clock
        and power are sampled; a launched rung's launched block, then its replay. The H100 trains these
        models at its power limit, and its clock follows the last second or so of work: steps
        interleaved one by one, A B A B, would each run at a clock set by their neighbours (a launched
        step came out 9% faster than after a hold of its own, notes/ladder-power.md). One graph at a
        time: two graphed steps of a 2.7B model do not fit beside each other.

        Returns each rung's launched turns, its replayed turns, and each phase's times (s) over its
        launched turns' timed steps."""
        ladder, rows, device = self.ladder, self.rows, self.device
        gpu = nvidia_smi_id(device)
        turn_budget = replace(budget, max_seconds=budget.max_seconds / TURNS)
        launched, replayed, phases = {}, {}, {}
        for turn in range(TURNS):
            for r in live:
                forget_kernels()
                if self.ok(r) and not r.graphed:
                    ladder.start(r.name)
                    step = ladder.step(r, timed_phases=True)
                    block = timed_block(r.name, step, device, warmup_steps, turn_budget, self.settle_seconds, gpu)
                    if block.timings.error is not None:  # a rung that cannot run its turns is an OOM row
                        rows[r.name].update(
                            status="oom", note=f"turn {turn + 1}: {str(block.timings.error).splitlines()[0]}"
                        )
                        log.warning(f"{r.name:>18} oom")
                    else:
                        launched.setdefault(r.name, []).append(block)
                        clock, n = ladder.clocks[r.name], len(block.timings.host_s)
                        for part in PHASES:
                            phases.setdefault(r.name, {}).setdefault(part, []).extend(clock.seconds(part, last=n))
                        if turn == 0:
                            rows[r.name]["peak_mem_gib"] = steady_peak_gib(step, device)
                        rows[r.name]["attention_kernel"] = attention_kernel(r.attention)
                        log.info(f"{r.name:>18} launched {block.median_ms:9.2f} ms")
                    del step
                    self.release()
                if not self.ok(r) or (device.type != "cuda" and not r.graphed):
                    continue
                if (replay := self.captured(r)) is None:
                    continue
                block = timed_block(r.name, replay, device, 1, turn_budget, self.settle_seconds, gpu)
                if block.timings.error is not None:
                    rows[r.name].update(note=f"graph replay: {str(block.timings.error).splitlines()[0]}")
                else:
                    replayed.setdefault(r.name, []).append(block)
                    rows[r.name]["attention_kernel"] = attention_kernel(r.attention)
                    log.info(f"{r.name:>18} replayed {block.median_ms:9.2f} ms")
                del replay
                self.release()
        return launched, replayed, phases

    def profile_and_check_graphed(self, live: list[Rung], profile: bool) -> dict[str, pd.DataFrame]:
        """Each graphed rung captured once more: its kernels profiled in the replay (if ``profile``),
        then its loss check. Returns the profiles by rung name."""
        profiles = {}
        for r in live:
            if not self.ok(r) or not r.graphed or (replay := self.captured(r)) is None:
                continue
            if profile:
                profiles[r.name] = kernel_times(replay, self.device, self.settle_seconds).assign(
                    rung=r.name, status="ok", profiled="replay"
                )
            self.check(r, replay)
            del replay
            self.release()
        return profiles

    def record(self, r: Rung, launched: list | None, replayed: list | None, phases: dict | None, budget: Budget):
        """Pool ``r``'s turns into its row: launched statistics and phases, replay statistics, the clock
        and power in each, and each turn's median."""
        row = self.rows[r.name]
        if launched:
            timings, clocks = pooled(launched)
            row.update(launched_columns(timings, budget))
            row.update(clocks.columns("launched_"), **turn_columns(launched, "launched_"))
            row.update({PHASES[p]: 1e3 * statistics.median(seconds) for p, seconds in phases.items()})
        if replayed:
            timings, clocks = pooled(replayed)
            row.update(clocks.columns("replay_"), **turn_columns(replayed))
            if r.graphed:  # the rung is its replay: launched and graphed are one measurement
                row.update(launched_columns(timings, budget))
            row.update(graphed_columns(timings, row["median_ms"], budget))
            log.info(f"{r.name:>18} graphed  {row['graphed_median_ms']:9.2f} ms")

    def check(self, rung: Rung, step) -> None:
        """Train ``check_steps`` steps of ``step`` from the initial weights; record the loss after."""
        if not self.check_steps:
            return
        self.ladder.start(rung.name)
        try:
            with phase("check"):
                for _ in range(self.check_steps):
                    step()
        except torch.OutOfMemoryError as error:
            self.rows[rung.name]["note"] = f"loss check: {str(error).splitlines()[0]}"
            return
        self.rows[rung.name].update(
            check_steps=self.check_steps,
            check_lr=self.ladder.lr,
            initial_loss=self.initial_loss,
            loss_after_check=self.ladder.loss(),
        )

    def captured(self, r: Rung):
        """``r``'s step as a CUDA graph from the initial weights and an empty AdamW state, or None with
        the reason in its row (a graphed rung then did not run)."""
        self.ladder.start(r.name)
        try:
            return capture_graph(self.ladder.step(r), self.device, after_warmup=self.ladder.drop_grads)
        except GraphUnavailable as reason:
            self.rows[r.name].update(
                note=str(reason), **({"status": "oom" if "memory" in str(reason) else "skipped"} if r.graphed else {})
            )
            log.info(f"{r.name:>18} {reason}")
            self.ladder.drop_bf16()
            return None

    def profile_launched(self, r: Rung) -> pd.DataFrame:
        """GPU time per kernel of ``r``'s launched step under torch.profiler, from the initial weights
        and an empty AdamW state, as every timed block: the loss checks before it trained the model."""
        self.ladder.start(r.name)
        step = self.ladder.step(r)
        try:
            step()
            return kernel_times(step, self.device, self.settle_seconds).assign(
                rung=r.name, status="ok", profiled="launched"
            )
        except torch.OutOfMemoryError as error:
            return pd.DataFrame({"rung": [r.name], "status": "oom", "note": str(error).splitlines()[0]})
        finally:
            del step
            self.release()

    def release(self) -> None:
        """After ``del`` of a step or replay: its memory and the bf16 copies go back before the next."""
        self.ladder.drop_grads()
        self.ladder.drop_bf16()


@phase("profile")
def kernel_times(step, device: torch.device, settle_s: float = 0.0, steps: int = 3) -> pd.DataFrame:
    """GPU time per kernel of ``steps`` calls of a warmed-up ``step`` (a launched step or a graph replay)
    under torch.profiler: what the compiler leaves on the table, by name and category. The step is
    held untimed first (at most ``settle_s``), as the timed blocks are: at the power limit a GEMM's
    time depends on the clock, and the clock on the last second or so of work."""
    from torch.profiler import ProfilerActivity, profile

    hold(step, device, settle_s)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize(device)
    kernels = pd.DataFrame(
        [(e.name, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA],
        columns=["kernel", "us"],
    )
    table = kernels.groupby("kernel")["us"].agg(["count", "sum"]).reset_index()
    return pd.DataFrame(
        {
            "kernel": table["kernel"].str.slice(0, 200),
            "category": table["kernel"].map(categorize),
            "calls_per_step": table["count"] / steps,
            "ms_per_step": table["sum"] / steps / 1e3,
        }
    ).sort_values("ms_per_step", ascending=False)


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


def rung_list(names: str) -> tuple[Rung, ...]:
    """``--rungs``: the named rungs, in the ladder's order."""
    known = {r.name for r in RUNGS}
    unknown = [name for name in names.split(",") if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown rung {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return tuple(r for r in RUNGS if r.name in names.split(","))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(SIZES))
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10, help="at least this many, then more until the CI is tight")
    p.add_argument("--ci-halfwidth", type=float, default=0.01)
    p.add_argument(
        "--max-seconds",
        type=float,
        default=30.0,
        help="time budget past --measured-steps, per rung and timing kind, over its turns",
    )
    p.add_argument("--check-steps", type=int, default=20, help="train steps per rung for the loss check (0: none)")
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=5.0,
        help="the most seconds of untimed steps before each timed block; the hold ends once steady",
    )
    p.add_argument(
        "--loss-tolerance",
        type=float,
        default=0.02,
        help="target written on the checked rows: each bf16 rung's loss within this share of the loss drop",
    )
    p.add_argument(
        "--power-limit-share",
        type=float,
        default=0.97,
        help="written on the checked rows for the report: a replay whose power reaches this share of the board's "
        "limit counts as held by it, where nvidia-smi reports no clock-event reasons",
    )
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--part",
        choices=PARTS,
        default="both",
        help="both parts in this process, or one: 'timed' (the turns), then 'checked' (the loss checks and "
        "kernel profiles, in a process of its own, from the timed part's CSV given as --timed)",
    )
    p.add_argument("--timed", help="the timed part's CSV (with --part checked)")
    p.add_argument(
        "--rungs",
        type=rung_list,
        default=RUNGS,
        help=f"comma-separated, a subset to run in turns (default: all): {','.join(r.name for r in RUNGS)}",
    )
    p.add_argument("--out", required=True)
    p.add_argument("--kernels", help="also write each rung's GPU time per kernel to this CSV (CUDA only)")
    args = p.parse_args(argv)
    if (args.part == "checked") != bool(args.timed):
        p.error("--timed goes with --part checked, and only with it")
    budget = Budget(min_steps=args.measured_steps, rel_halfwidth=args.ci_halfwidth, max_seconds=args.max_seconds)
    device = resolve_device(args.device)
    point = Point(args.size, args.context_length, args.batch_size, device)
    if args.part == "both":
        rows = run_ladder(
            point,
            args.warmup_steps,
            budget,
            args.check_steps,
            args.rungs,
            kernels_out=args.kernels,
            settle_seconds=args.settle_seconds,
        )
    elif args.part == "timed":
        rows = list(time_ladder(point, args.warmup_steps, budget, args.rungs, args.settle_seconds)[0].values())
    else:
        rows = check_timed(point, args.timed, args.check_steps, args.settle_seconds, args.kernels, args.rungs)
    if args.part != "timed":
        for row in rows:
            row["loss_tolerance"] = args.loss_tolerance
            row["power_limit_share"] = args.power_limit_share
    write_rows(rows, args.out)


def check_timed(
    point: Point, timed: str, check_steps: int, settle_seconds: float = 0.0, kernels_out: str | None = None, rungs=RUNGS
) -> list[dict]:
    """The second part in a process of its own: the timed part's rows (read as the text they were
    written as, so that they are written back unchanged) with their loss checks added, on a Ladder
    built again from the same seed for the rungs still 'ok'."""
    frame = pd.read_csv(timed, dtype=str, keep_default_na=False)
    rows = {row["rung"]: row for row in frame.to_dict("records")}
    live = [r for r in rungs if rows[r.name]["status"] == "ok"]
    ladder = Ladder(*point, live) if live else None
    check_ladder(ladder, rows, point.base(), check_steps, settle_seconds, kernels_out)
    return list(rows.values())


if __name__ == "__main__":
    run_study(main)
