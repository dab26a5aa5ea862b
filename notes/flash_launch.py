# pinned: 2b557cf28f35  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_attention_gluon.Forward, flash_attention_gluon._over, Forward.descs
"""Host time of our FlashAttention launched: where it goes, and the plans per signature against main.

Times main's code (``src/lmperf/attention`` at BASE, copied by ``base`` below as the package
``lmperf_base``) beside this tree's and SDPA pinned to its flash and cuDNN backends, in one process,
the implementations taking turns round by round. Causal, bf16, the inputs as the flash sweep makes
them: (batch, seq, d), one head.

    # here: main's attention package as lmperf_base (the ops renamed so both register)
    python notes/flash_launch.py base e177c8e .lab/base
    # on the GPU, from a copy of this tree with .lab/base beside src/
    PYTHONPATH=src:.lab/base python notes/flash_launch.py breakdown|sweep|compile --out DIR

Ran at: cdc0da5 (NVIDIA H200, torch 2.11, Triton 3.6), ``breakdown``, output: notes/flash-launch.md
Ran at: d5894e1 (NVIDIA H200), ``sweep --rounds 4`` and ``compile --rounds 3``, output: notes/flash-launch.md

Per (implementation, shape, pass) and round:
- ``launched_ms``: the flash sweep's number (``lmperf.studies.flash.time_pass``: do_bench's median,
  L2 flushed before each call, gradients reset), warm-up 25 ms and 100 ms timed as the sweep's config;
- ``wall_ms``: synchronized wall clock of one call, median of 200 (or of those that fit 0.25 s, at
  least 10), as a user times a call;
- ``graphed_ms``: the pass replayed as a CUDA graph (``time_graphed``): the GPU's own time, in the
  first round only (it varies far less than the rest);
- ``host_us``: host time per call, 20 calls issued back to back without a sync, median of 3 such
  runs: what the host spends issuing a call, whatever the GPU does meanwhile.
"""

import argparse
import cProfile
import csv
import io
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

# both versions' autotuners read one tuning per shape from Triton's cache: the same tiles for both
os.environ.setdefault("TRITON_CACHE_AUTOTUNING", "1")

COMMIT = os.environ.get("LMPERF_COMMIT", "unknown")
BF16_SEQS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def make_base(commit: str, dest: Path) -> None:
    """src/lmperf/attention at commit, as the package lmperf_base.attention (its torch ops as lmperf_base::)."""
    root = Path(__file__).resolve().parents[1]
    package = dest / "lmperf_base" / "attention"
    package.mkdir(parents=True, exist_ok=True)
    (dest / "lmperf_base" / "__init__.py").write_text("")
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", commit, "src/lmperf/attention/"], cwd=root, capture_output=True, text=True
    ).stdout.split()
    for name in names:
        text = subprocess.run(["git", "show", f"{commit}:{name}"], cwd=root, capture_output=True, text=True).stdout
        text = text.replace("lmperf.attention", "lmperf_base.attention")
        text = re.sub(r'Library\("lmperf"', 'Library("lmperf_base"', text)
        text = text.replace('"lmperf::', '"lmperf_base::').replace("torch.ops.lmperf.", "torch.ops.lmperf_base.")
        (package / Path(name).name).write_text(f"# src/lmperf/attention at {commit}, renamed lmperf_base\n{text}")


def implementations():
    import torch.nn.functional as F
    from lmperf_base.attention.flash_triton import FlashAttentionTriton as Base
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from lmperf.kernels.flash_attention import FlashAttentionTriton as Ours

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                if q.dim() == 4:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=causal)[:, 0]

        return run

    return {
        "main": lambda q, k, v, c: Base.apply(q, k, v, c),
        "plans": lambda q, k, v, c: Ours.apply(q, k, v, c),
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    }


def inputs(batch, seq, d, heads=None, seed=0):
    """bf16 leaves: (batch, seq, d), or the model's (batch, heads, seq, d) views of (batch, seq, heads, d)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed + seq + d)
    if heads is None:
        return [torch.randn(batch, seq, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                for _ in range(3)]  # fmt: skip
    return [
        torch.randn(batch, seq, heads, d, device="cuda", dtype=torch.bfloat16, generator=g)
        .transpose(1, 2)
        .detach()
        .requires_grad_()
        for _ in range(3)
    ]


def step(attention, q, k, v, pass_):
    import torch

    def forward():
        with torch.no_grad():
            attention(q, k, v, True)

    def forward_backward():
        q.grad = k.grad = v.grad = None
        attention(q, k, v, True).sum().backward()

    return forward if pass_ == "forward" else forward_backward


def host_us(fn, calls=20, runs=3):
    import torch

    fn()
    per_call = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per_call)


def wall_ms(fn, calls=200, budget_s=0.25):
    import torch

    times = []
    start = time.perf_counter()
    while len(times) < calls and (len(times) < 10 or time.perf_counter() - start < budget_s):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def measure(attention, q, k, v, pass_, graphed=True) -> dict:
    from lmperf.measure import GraphUnavailable
    from lmperf.studies.flash import time_graphed, time_pass

    fn = step(attention, q, k, v, pass_)
    row = {"host_us": host_us(fn), "wall_ms": wall_ms(fn)}
    row["launched_ms"] = time_pass(attention, q, k, v, True, pass_, 25, 100)
    q.grad = k.grad = v.grad = None
    if graphed:
        try:
            row["graphed_ms"] = time_graphed(attention, q, k, v, True, pass_, 25, 100)
        except GraphUnavailable:
            row["graphed_ms"] = float("nan")
    return row


def interleaved(impls, shapes, passes, rounds, out: Path, graphed=True):
    """Every (shape, pass): the implementations in turns, `rounds` times; a CSV row per measurement,
    with the largest relative difference of O, dQ, dK, dV from the first implementation's."""
    import torch

    from lmperf.studies.flash import relative_difference

    with open(out, "w", newline="") as f:
        writer = None
        for shape in shapes:
            q, k, v = inputs(*shape)
            for pass_ in passes:
                for name, attention in impls.items():  # first calls: compile, tune, plan
                    step(attention, q, k, v, pass_)()
                reference = next(iter(impls.values()))
                diffs = {
                    name: relative_difference(attention, reference, q, k, v, True) for name, attention in impls.items()
                }
                q.grad = k.grad = v.grad = None
                for r in range(rounds):
                    for name, attention in impls.items():
                        row = {"commit": COMMIT, "device": torch.cuda.get_device_name(), "impl": name,
                               "shape": "x".join(map(str, shape)), "pass": pass_, "round": r,
                               "rel_diff_vs_first": diffs[name]}  # fmt: skip
                        row.update(measure(attention, q, k, v, pass_, graphed and r == 0))
                        if writer is None:
                            writer = csv.DictWriter(f, fieldnames=list(row))
                            writer.writeheader()
                        writer.writerow(row)
                        f.flush()
                        print(
                            f"{row['shape']:>14} {pass_:>16} {name:>10} r{r} host {row['host_us']:7.1f} us "
                            f"launched {row['launched_ms']:.3f} wall {row['wall_ms']:.3f} "
                            f"graphed {row.get('graphed_ms', float('nan')):.3f} ms",
                            flush=True,
                        )
            del q, k, v
            torch.cuda.empty_cache()


def summary(csv_path: Path) -> str:
    """Per (shape, pass, impl): the median over rounds (min-max) of each metric; and per round, ours
    over the faster of SDPA flash and cuDNN launched in that round (paired), their median and max."""
    rows = list(csv.DictReader(open(csv_path)))
    groups = {}
    for row in rows:
        groups.setdefault((row["shape"], row["pass"]), {}).setdefault(row["impl"], []).append(row)
    lines = []
    for (shape, pass_), impls in groups.items():
        for name, rs in impls.items():
            cols = []
            for metric in ("launched_ms", "wall_ms", "graphed_ms", "host_us"):
                vals = sorted(float(r[metric]) for r in rs if r.get(metric) not in (None, ""))
                if vals:
                    cols.append(f"{metric} {statistics.median(vals):.3f} ({vals[0]:.3f}-{vals[-1]:.3f})")
            lines.append(f"{shape:>14} {pass_:>16} {name:>14}  " + "  ".join(cols))
        launched = {name: {r["round"]: float(r["launched_ms"]) for r in rs} for name, rs in impls.items()}
        if "sdpa_flash" not in launched:
            continue
        sdpa = {r: min(launched["sdpa_flash"][r], launched["sdpa_cudnn"][r]) for r in launched["sdpa_flash"]}
        for name in ("main", "plans"):
            if name in launched:
                ratios = [launched[name][r] / sdpa[r] for r in sdpa]
                lines.append(
                    f"{shape:>14} {pass_:>16} {name:>14}  launched / faster SDPA, paired by round: median "
                    f"{statistics.median(ratios):.2f}, max {max(ratios):.2f}; of the medians "
                    f"{statistics.median(launched[name].values()) / statistics.median(sdpa.values()):.2f}"
                )
    return "\n".join(lines)


def profile_text(fn, calls=200) -> str:
    fn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    return text.getvalue()


def kernels_per_call(fn) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = [(e.key, e.count) for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    allocs = sum(e.count for e in events if e.key in ("aten::empty", "aten::empty_strided", "aten::empty_like"))
    return f"{len(kernels)} kernel names, {sum(c for _, c in kernels)} launches, {allocs} allocations: {kernels}"


def pieces(out: Path) -> None:
    """Host time of the pieces of main's launch path, and of this tree's, at the sweep's 1 x 1024 x 64."""
    import lmperf_base.attention.flash_gluon as base_gluon
    import lmperf_base.attention.flash_triton as base_triton
    import torch
    from triton.backends.nvidia.driver import make_tensordesc_arg

    from lmperf.kernels import flash_attention, flash_attention_gluon

    q, k, v = inputs(1, 1024, 64)
    q4, k4, v4 = (x.detach().unsqueeze(1) for x in (q, k, v))
    o4 = torch.empty_like(q4)
    L = torch.empty(1, 1, 1024, device="cuda")
    dO = torch.randn_like(q)
    expanded = torch.ones((), device="cuda").expand_as(q)  # the gradient of out.sum()

    class Nothing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, K, V, is_causal=False, merged=False):
            ctx.save_for_backward(Q, K, V, Q, Q)
            return torch.empty_like(Q)

        @staticmethod
        def backward(ctx, dO):
            ctx.saved_tensors
            return dO, dO, dO, None, None

    base_out = base_triton.FlashAttentionTriton.apply(q, k, v, True)
    plan_out = flash_attention.FlashAttentionTriton.apply(q, k, v, True)
    desc = base_gluon._as_rows(q4, 64)[0]
    forward_plan = flash_attention_gluon.Forward(q4, k4, v4, o4, True)
    forward_plan(q4, k4, v4, o4, L)
    meta = getattr(forward_plan.main.compiled.metadata, "tensordesc_meta", None)
    meta = meta[0] if meta else None
    sums = {}

    def sum_backward(fn):
        def run():
            q.grad = k.grad = v.grad = None
            fn(q, k, v, True).sum().backward()

        return run

    items = {
        "main: apply, forward (grad)": lambda: base_triton.FlashAttentionTriton.apply(q, k, v, True),
        "main: backward alone": lambda: base_out.backward(dO, retain_graph=True),
        "main: check_inputs": lambda: base_triton.check_inputs(q, k, v, True, heads=True),
        "main: 3 x _dense": lambda: [base_triton._dense(x) for x in (q, k, v)],
        "main: flash_gluon.unsupported": lambda: base_gluon.unsupported(q4, k4, v4),
        "main: 3 x _as_rows (TensorDescriptor)": lambda: [base_gluon._as_rows(x, 64) for x in (q4, k4, v4)],
        "main: flash_gluon.forward": lambda: base_gluon.forward(q4, k4, v4, o4, L, True),
        "plans: apply, forward (grad)": lambda: flash_attention.FlashAttentionTriton.apply(q, k, v, True),
        "plans: backward alone": lambda: plan_out.backward(dO, retain_graph=True),
        "plans: gluon Forward call": lambda: forward_plan(q4, k4, v4, o4, L),
        "plans: _forward (plan lookup, allocations, launches)": lambda: flash_attention._forward(q, k, v, True),
        "plans: 3 x _signature (the plan's key)": lambda: [flash_attention._signature(x) for x in (q, k, v)],
        "plans: _backward (plan lookup, allocations, launches)": lambda: flash_attention._backward(
            q, k, v, plan_out, L[0], dO, True
        ),
        "plans: 3 x _over (descriptor on new storage)": lambda: [
            flash_attention_gluon._over(desc, x) for x in (q4, k4, v4)
        ],
        "make_tensordesc_arg (TMA encode, per descriptor)": lambda: make_tensordesc_arg(desc, meta),
        "torch.empty_like": lambda: torch.empty_like(q),
        "dO expanded .contiguous()": lambda: expanded.contiguous(),
        "no-op autograd.Function, forward": lambda: Nothing.apply(q, k, v, True),
        "no-op autograd.Function, fwd + sum + bwd": sum_backward(Nothing.apply),
        "main: fwd + sum + bwd": sum_backward(base_triton.FlashAttentionTriton.apply),
        "plans: fwd + sum + bwd": sum_backward(flash_attention.FlashAttentionTriton.apply),
    }
    with open(out, "w") as f:
        for name, fn in items.items():
            sums[name] = host_us(fn)
            f.write(f"{name:55s} {sums[name]:8.1f} us\n")
            print(f"{name:55s} {sums[name]:8.1f} us", flush=True)
        for name, fn in (
            ("main", base_triton.FlashAttentionTriton.apply),
            ("plans", flash_attention.FlashAttentionTriton.apply),
        ):
            f.write(f"\n{name} fwd + sum + bwd, torch.profiler: {kernels_per_call(sum_backward(fn))}\n")
        for name, fn in (
            ("main", base_triton.FlashAttentionTriton.apply),
            ("plans", flash_attention.FlashAttentionTriton.apply),
        ):
            f.write(f"\n==== cProfile, {name}, 200 x fwd + sum + bwd at 1 x 1024 x 64 ====\n")
            f.write(profile_text(sum_backward(fn)))


def ops_table(fn, rows=25) -> str:
    """torch.profiler's CPU and CUDA time per op over 20 calls, by self CPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=70)


def compiled_profile(out: Path) -> None:
    """Where a compiled forward + backward spends its time, beside the direct call, at 4 x 4096 x 64."""
    import lmperf_base.attention.flash_triton as base_triton
    import torch
    import torch._functorch.config

    from lmperf.kernels import flash_attention

    torch._functorch.config.donated_buffer = False
    q, k, v = inputs(4, 4096, 64)
    with open(out, "w") as f:
        for name, module in (("plans", flash_attention), ("main", base_triton)):
            apply = module.FlashAttentionTriton.apply
            compiled_apply = torch.compile(apply)
            explain = torch._dynamo.explain(apply)(q, k, v, True)
            f.write(f"==== {name}: graphs {explain.graph_count}, breaks {explain.graph_break_count}: "
                    f"{[str(r.reason)[:200] for r in explain.break_reasons]}\n")  # fmt: skip
            for label, fn in (("direct", apply), ("compiled", compiled_apply)):
                run = step(fn, q, k, v, "forward_backward")
                f.write(f"\n==== {name} {label}: fwd + sum + bwd, host {host_us(run):.1f} us ====\n")
                f.write(ops_table(run))
                f.write(profile_text(run, calls=50))
                f.flush()


def compiled(out: Path, rounds: int) -> None:
    """torch.compile(FlashAttentionTriton.apply) against the direct call, main's and ours, at 4 x 4096 x 64."""
    import lmperf_base.attention.flash_triton as base_triton
    import torch
    import torch._functorch.config

    from lmperf.kernels import flash_attention

    torch._functorch.config.donated_buffer = False  # as the flash study: backward re-run on one graph
    impls = {}
    for name, module in (("main", base_triton), ("plans", flash_attention)):
        apply = module.FlashAttentionTriton.apply
        fn = torch.compile(apply)
        impls[f"{name}"] = lambda q, k, v, c, a=apply: a(q, k, v, c)
        impls[f"{name}_compiled"] = lambda q, k, v, c, f=fn: f(q, k, v, c)
    interleaved(impls, [(4, 4096, 64)], ["forward", "forward_backward"], rounds, out, graphed=False)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["base", "breakdown", "sweep", "compile"])
    p.add_argument("args", nargs="*")
    p.add_argument("--out", default=".")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--d", type=int, nargs="+", default=[64, 128])
    p.add_argument("--seqs", type=int, nargs="+", default=BF16_SEQS)
    p.add_argument("--passes", nargs="+", default=["forward_backward"])
    a = p.parse_args()
    if a.what == "base":
        make_base(a.args[0], Path(a.args[1]))
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    print(f"commit {COMMIT}, {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    if a.what == "breakdown":
        pieces(out / "breakdown.txt")
        compiled_profile(out / "compiled_profile.txt")
    elif a.what == "sweep":
        shapes = [(1, seq, d) for d in a.d for seq in a.seqs]
        interleaved(implementations(), shapes, a.passes, a.rounds, out / "sweep.csv")
        (out / "sweep.txt").write_text(summary(out / "sweep.csv"))
        print(summary(out / "sweep.csv"))
    elif a.what == "compile":
        compiled(out / "compile.csv", a.rounds)
        (out / "compile.txt").write_text(summary(out / "compile.csv"))
        print(summary(out / "compile.csv"))


if __name__ == "__main__":
    sys.exit(main())
