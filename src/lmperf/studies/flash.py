"""Attention kernels benchmarked side by side with triton.testing.do_bench (median of the timed runs).

Each pass is timed twice: launched from Python (``median_ms``, the handout's method) and replayed
as a CUDA graph (``graphed_median_ms``: the GPU's own time). At short sequences a launch costs the
host more than the kernel costs the GPU, so ``host_bound`` marks rows whose launched median is
more than ``host_bound_threshold`` (a column of the row) over the graphed one; compare kernels on
graphed times there. The backward alone
is not graphed: its input graph is built outside the capture.

    python -m lmperf.studies.flash leaderboard --out results/flash/leaderboard.csv
    python -m lmperf.studies.flash sweep --dtype bf16 --head-dim 64 --seq-lengths 128,256 \
        --implementations ours_triton,sdpa_flash --out results/flash/sweep/bf16-d64.csv

The leaderboard shape of CS336 Assignment 2: q, k, v = randn(3, 16, 16384, 64), bf16, causal;
``torch.compile(FlashAttentionTriton.apply)``; ``o.sum().backward()``; do_bench(rep=10000,
warmup=1000); the same for torch SDPA pinned to its flash and cuDNN backends, in the same process.
In the leaderboard and in the sweep, the implementations of a pass take turns in ``rounds``
interleaved rounds that share the warm-up and repetition time: each row has the median of its
round medians with a bootstrap CI, and the rounds (``round_ms``), so that the report can pair two
implementations round by round. That matters most launched at short sequences, where the host sets
the time and one stretch of a busy host would otherwise fall on one implementation alone.
FLOPs: forward 4·B·H·N²·d, halved when causal; backward 2.5x forward.

Our rows name the kernels that ran (``attention_kernel``): on an sm_90 GPU FlashAttentionTriton
hands a pass to the Gluon kernels where they take its shape ('gluon', or per pass as in 'gluon
forward, triton backward'), elsewhere it runs the Triton kernels ('triton'), and the tiles, warps
and stages the autotuner picked for those (``tiles``; a backward row names those of the forward
that made its inputs too): picks that time alike can differ from one process to the next, and with
them the time.
"""

import argparse
import logging
import timeit

import torch
import torch._functorch.config
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from lmperf import grid
from lmperf.attention import FlashAttentionPyTorch, attention_kernel, attention_tiles, forget_kernels, naive_attention
from lmperf.measure import GraphUnavailable, capture_graph, fingerprint, host_bound, release_cached, write_rows
from lmperf.measure.attention_flops import attention_flops
from lmperf.measure.phases import phase
from lmperf.measure.stats import join_ms, summarize_ms
from lmperf.measure.timing import HOST_BOUND, graph_pool
from lmperf.recompiles import compile_per_shape
from lmperf.studies import int_list, run_study

log = logging.getLogger(__name__)

DTYPES = dict(zip(grid.FLASH_DTYPES, (torch.bfloat16, torch.float32)))

PASSES = ("forward", "backward", "forward_backward")

# The tiled PyTorch forward runs (N/64)^2/2 tiles from a Python loop: 2 s a pass at N = 16384.
# Above this length its rows are skipped rather than spending minutes of GPU time on launches.
PYTHON_LOOP_MAX_SEQ = 4096


def _sdpa(backend: SDPBackend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):  # pinned: fails rather than falling back to another backend
            return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=causal)[:, 0]

    return run


def _fa4():
    """FlashAttention-4 (the flash-attn-4 package, CuTe DSL), an anchor beside SDPA where installed;
    it takes (batch, seq, heads, d), so our (batch, seq, d) inputs are one head."""

    def run(q, k, v, causal):
        from flash_attn.cute import flash_attn_func

        out = flash_attn_func(q[:, :, None], k[:, :, None], v[:, :, None], causal=causal)
        return (out[0] if isinstance(out, tuple) else out)[:, :, 0]

    return run


def unavailable(name: str, dtype: str) -> str:
    """Why an implementation cannot run here ('' where it can): FlashAttention-4 is an optional
    package (not a dependency of lmperf), and a 16-bit kernel."""
    if name != "fa4":
        return ""
    if dtype != "bf16":
        return "FlashAttention-4 takes 16-bit inputs only"
    try:
        import flash_attn.cute  # noqa: F401
    except ImportError as error:
        return f"flash-attn-4 is not installed ({error}): pip install --pre flash-attn-4"
    return ""


def implementations(compile_ours: bool = False) -> dict:
    """name -> attention(q, k, v, causal) on (batch, seq, d) tensors.

    compile_ours wraps our Triton kernels in torch.compile, as the leaderboard prescribes. The sweep
    calls them directly: across its ten shapes the compiled wrapper held our batch-1 forward near
    1 ms from seq 1024 on (H100), host time the timing would have charged to the kernels.
    """
    from lmperf.kernels.flash_attention import FlashAttentionTriton  # imports triton: only on a GPU

    # The backward pass is timed by re-running backward on one graph (retain_graph=True), which a
    # compiled graph refuses when it donates its saved buffers to the backward.
    torch._functorch.config.donated_buffer = False
    compiled_naive = compile_per_shape(naive_attention)  # a graph per length, as e2e compiles its blocks
    ours = torch.compile(FlashAttentionTriton.apply) if compile_ours else FlashAttentionTriton.apply
    runs = {
        "ours_triton": lambda q, k, v, c: ours(q, k, v, c),
        "ours_pytorch": lambda q, k, v, c: FlashAttentionPyTorch.apply(q, k, v, c),
        "naive": lambda q, k, v, c: naive_attention(q, k, v, is_causal=c),
        "naive_compiled": lambda q, k, v, c: compiled_naive(q, k, v, is_causal=c),
        "sdpa_flash": _sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": _sdpa(SDPBackend.CUDNN_ATTENTION),
        "fa4": _fa4(),
    }
    if tuple(runs) != grid.FLASH_IMPLEMENTATIONS:  # the names a grid may list, each with what runs it
        raise RuntimeError(f"flash implementations {list(runs)}, lmperf.grid {list(grid.FLASH_IMPLEMENTATIONS)}")
    return runs


def time_pass(attention, q, k, v, causal: bool, pass_: str, warmup_ms: int, rep_ms: int) -> float:
    """Median milliseconds of one pass; gradients are reset between runs. The caller names the phase
    (a first call compiles and autotunes: warm-up, not timed steps)."""
    from triton.testing import do_bench

    grads = [q, k, v]
    if pass_ == "forward":
        with torch.no_grad():
            return do_bench(lambda: attention(q, k, v, causal), warmup=warmup_ms, rep=rep_ms, return_mode="median")
    if pass_ == "backward":
        out = attention(q, k, v, causal)
        grad_out = torch.randn_like(out)
        return do_bench(
            lambda: out.backward(grad_out, retain_graph=True),
            warmup=warmup_ms,
            rep=rep_ms,
            grad_to_none=grads,
            return_mode="median",
        )
    return do_bench(
        lambda: attention(q, k, v, causal).sum().backward(),
        warmup=warmup_ms,
        rep=rep_ms,
        grad_to_none=grads,
        return_mode="median",
    )


def graphed_pass(attention, q, k, v, causal: bool, pass_: str, pool=None):
    """The pass (forward, or forward + backward) captured as a CUDA graph, in ``pool`` if given: a
    function that replays it."""
    if pass_ == "backward":
        raise GraphUnavailable("the backward alone is not graphed")

    def step():
        with torch.set_grad_enabled(pass_ != "forward"):
            out = attention(q, k, v, causal)
            if pass_ != "forward":
                out.sum().backward()

    return capture_graph(step, q.device, pool, warmup_steps=3)  # warm-up autotunes and compiles first


def rate_columns(flops: float, ms: float, graphed_ms: float | None = None) -> dict:
    """TFLOP/s of the launched median and, where the pass was replayed, of the replayed one, with the
    host's share and whether it bounds the pass."""
    columns = {"tflops": flops / (ms / 1e3) / 1e12}
    if graphed_ms is not None:
        columns.update(
            graphed_tflops=flops / (graphed_ms / 1e3) / 1e12,
            host_overhead_ms=ms - graphed_ms,
            host_bound=host_bound(ms, graphed_ms, HOST_BOUND),
            host_bound_threshold=HOST_BOUND,
        )
    return columns


def relative_difference(attention, reference, q, k, v, causal: bool) -> float:
    """Largest ||x - ref|| / ||ref|| over O, dQ, dK, dV against another implementation."""
    results = []
    for fn in (attention, reference):
        q_, k_, v_ = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out = fn(q_, k_, v_, causal)
        out.float().sum().backward()
        results.append([out.detach(), q_.grad, k_.grad, v_.grad])
    return max(((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(*results))


@phase("timed")
def interleaved_medians(timers: dict, rounds: int) -> dict[str, list[float]]:
    """Each timer's result per round, the timers taking turns round after round (A B C A B C ...), so
    that a slow stretch of the run (clocks, power, a neighbour) hits every implementation alike and
    the ratio of two implementations can be taken round by round."""
    times = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            times[name].append(timer())
    return times


def round_columns(times_ms: list[float], prefix: str = "") -> dict:
    """The summary of the round medians (their median with its bootstrap CI, ...) and the rounds
    themselves, for paired ratios."""
    seconds = [t / 1e3 for t in times_ms]
    return {**summarize_ms(seconds, prefix), f"{prefix}round_ms": join_ms(seconds)}


def refusal(name: str, error: RuntimeError) -> dict:
    """The row of an implementation that cannot take a pass: out of memory, or an SDPA backend that
    refuses the inputs (its flash kernels take no fp32), with torch's reason; any other error is raised."""
    if isinstance(error, torch.OutOfMemoryError):
        return {"status": "oom", "note": str(error).split(" GPU ")[0]}
    if name.startswith("sdpa") and "No available kernel" in str(error):
        return {"status": "skipped", "note": str(error).splitlines()[0]}
    raise error


def in_turns(impls: dict, q, k, v, causal: bool, pass_: str, warmup_ms: int, rep_ms: int, rounds: int) -> dict:
    """Per implementation, one pass timed launched and then replayed as a CUDA graph, each in
    ``rounds`` interleaved rounds that share warmup_ms and rep_ms, so that two implementations can be
    compared round by round; the peak memory of one launched pass; and the pass's rates.

    An implementation that cannot take the pass is a row of its own (``refusal``) and sits the rounds
    out. One whose call takes longer than a round's repetition time (rep_ms / rounds) is timed in one
    round with the whole warm-up and repetition time, ahead of the others: do_bench makes about eight
    calls however short its time, so rounds would multiply its cost without adding a sample. The
    graphs share one memory pool (they replay one at a time); one whose pass is not replayed (the
    backward alone, or out of memory) says why in ``graph_note`` and keeps its launched columns.
    """
    from triton.testing import do_bench

    batch, seq, d = q.shape
    flops = attention_flops(batch, seq, d, causal, pass_)
    warm, rep = warmup_ms / rounds, rep_ms / rounds
    columns, taking_turns, alone = {}, {}, {}
    forget_kernels()
    for name, attention in impls.items():
        torch.cuda.reset_peak_memory_stats(q.device)
        begun = timeit.default_timer()
        try:
            with phase("warmup"):  # the first call compiles and autotunes
                trial_ms = time_pass(attention, q, k, v, causal, pass_, 1, 1)
        except RuntimeError as error:
            columns[name] = refusal(name, error)
            continue
        finally:
            q.grad = k.grad = v.grad = None
        # where a target's warm-up goes: compile and autotune, or the calls themselves (at least eight)
        took = timeit.default_timer() - begun
        log.info(f"trial {name:>15} {pass_:>16} seq {seq:>6}: {took:6.2f} s, {trial_ms:.3f} ms a call")
        columns[name] = {"peak_mem_gib": torch.cuda.max_memory_allocated(q.device) / 2**30}
        if trial_ms <= rep:
            taking_turns[name] = lambda a=attention: time_pass(a, q, k, v, causal, pass_, warm, rep)
        else:
            alone[name] = lambda a=attention: time_pass(a, q, k, v, causal, pass_, warmup_ms, rep_ms)
    with phase("timed"):
        launched = {name: [timer()] for name, timer in alone.items()} | interleaved_medians(taking_turns, rounds)
    if "ours_triton" in launched:
        columns["ours_triton"]["attention_kernel"] = attention_kernel("flash_triton")
        columns["ours_triton"]["tiles"] = attention_tiles("flash_triton")
    pool, replays = graph_pool(q.device), {}
    for name in launched:
        try:
            replays[name] = graphed_pass(impls[name], q, k, v, causal, pass_, pool)
        except GraphUnavailable as reason:
            columns[name]["graph_note"] = str(reason)
    graphed = {}
    try:
        in_rounds = {name: replays[name] for name in taking_turns if name in replays}
        with phase("timed"):
            for name in set(alone) & set(replays):
                graphed[name] = [do_bench(replays[name], warmup=warmup_ms, rep=rep_ms, return_mode="median")]
            graphed |= interleaved_medians(
                {
                    name: lambda r=r: do_bench(r, warmup=warm, rep=rep, return_mode="median")
                    for name, r in in_rounds.items()
                },
                rounds,
            )
    except torch.OutOfMemoryError as error:  # do_bench's cache-flush buffer beside the graphs' pool
        graphed = {}
        for name in replays:
            columns[name]["graph_note"] = f"replays ran out of memory: {str(error).split(' GPU ')[0]}"
    del replays
    q.grad = k.grad = v.grad = None
    release_cached(q.device)
    for name, times in launched.items():
        row = columns[name]
        row.update(round_columns(times), rounds=len(times))
        if name in graphed:
            row.update(round_columns(graphed[name], "graphed_"))
            row.update(rate_columns(flops, row["median_ms"], row["graphed_median_ms"]))
        else:
            row.update(graphed_median_ms=float("nan"), **rate_columns(flops, row["median_ms"]))
    return columns


def leaderboard_rows(warmup_ms: int, rep_ms: int, rounds: int = 10, batch=16, seq=16384, d=64) -> list[dict]:
    """Ours, SDPA flash, SDPA cuDNN and FlashAttention-4 (a skipped row where it is not installed) at
    the leaderboard shape, timed in interleaved rounds."""
    device = torch.device("cuda")
    env = fingerprint(device)
    generator = torch.Generator(device=device).manual_seed(0)
    q, k, v = torch.randn(3, batch, seq, d, device=device, dtype=torch.bfloat16, generator=generator).unbind(0)
    q, k, v = (t.contiguous().requires_grad_() for t in (q, k, v))
    every = implementations(compile_ours=True)
    names = ("ours_triton", "sdpa_flash", "sdpa_cudnn", "fa4")
    reasons = {name: unavailable(name, "bf16") for name in names}
    impls = {name: every[name] for name in names if not reasons[name]}
    with phase("warmup"):  # each implementation's first calls: the compiled wrapper compiles, ours autotunes
        diffs = {name: relative_difference(impls[name], every["sdpa_flash"], q, k, v, True) for name in impls}
    timed = {}
    for pass_ in ("forward", "forward_backward"):
        try:
            timed[pass_] = in_turns(impls, q, k, v, True, pass_, warmup_ms, rep_ms, rounds)
        except torch.OutOfMemoryError as error:  # in the rounds, where every implementation had run once
            timed[pass_] = {name: refusal(name, error) for name in impls}
    for pass_ in timed:
        timed[pass_].update({name: {"status": "skipped", "note": reasons[name]} for name in names if name not in impls})
    rows = []
    for name in names:
        diff = diffs.get(name, float("nan"))
        for pass_ in ("forward", "forward_backward"):
            row = {
                "study": "flash_leaderboard",
                "implementation": name,
                "pass": pass_,
                "batch": batch,
                "seq": seq,
                "d": d,
                "dtype": "bf16",
                "causal": True,
                "warmup_ms": warmup_ms,
                "rep_ms": rep_ms,
                "rel_diff_vs_sdpa_flash": diff,
                "status": "ok",
                "note": "",
                **timed[pass_][name],
            }
            log.info(
                f"{name:>12} {pass_:>16} {row.get('median_ms', float('nan')):8.3f} ms launched "
                f"{row.get('graphed_median_ms', float('nan')):8.3f} ms graphed  diff {diff:.2e}"
            )
            rows.append({**row, **env})
    return rows


def sweep_rows(
    dtype: str,
    d: int,
    seq_lengths,
    names,
    warmup_ms: int,
    rep_ms: int,
    rounds: int = 4,
    batch: int = 1,
    device: torch.device = torch.device("cuda"),
) -> list[dict]:
    """Causal attention, batch 1: every implementation x pass at each sequence length, the
    implementations of a pass taking turns in ``rounds`` interleaved rounds (``in_turns``).

    Out-of-memory is a row; a backend that refuses the inputs is a skipped row with torch's reason.
    peak_mem_gib is the allocator's peak during one launched pass. ``device`` is CUDA where it times
    (do_bench's events); the tests pass a CPU with stand-in timers.
    """
    env = fingerprint(device)
    impls = implementations()
    reasons = {name: unavailable(name, dtype) for name in names}
    rows = []
    for seq in seq_lengths:
        generator = torch.Generator(device=device).manual_seed(seq)
        q, k, v = (
            torch.randn(batch, seq, d, device=device, dtype=DTYPES[dtype], generator=generator).requires_grad_()
            for _ in range(3)
        )
        skipped = {name: {"status": "skipped", "note": why} for name, why in reasons.items() if why}
        if seq > PYTHON_LOOP_MAX_SEQ and "ours_pytorch" in names:
            note = f"tiled Python loop; timed up to seq {PYTHON_LOOP_MAX_SEQ}"
            skipped.setdefault("ours_pytorch", {"status": "skipped", "note": note})
        taking_turns = {name: impls[name] for name in names if name not in skipped}
        timed = {}
        for pass_ in PASSES:
            try:
                timed[pass_] = in_turns(taking_turns, q, k, v, True, pass_, warmup_ms, rep_ms, rounds)
            except torch.OutOfMemoryError as error:  # in the rounds, where every implementation had run once
                timed[pass_] = {name: refusal(name, error) for name in taking_turns}
        for name in names:
            for pass_ in PASSES:
                row = {
                    "study": "flash_sweep",
                    "implementation": name,
                    "pass": pass_,
                    "batch": batch,
                    "seq": seq,
                    "d": d,
                    "dtype": dtype,
                    "causal": True,
                    "warmup_ms": warmup_ms,
                    "rep_ms": rep_ms,
                    "status": "ok",
                    "note": "",
                    **skipped.get(name, timed[pass_].get(name, {})),
                }
                log.info(
                    f"seq {seq:>6} {name:>15} {pass_:>16} {row['status']:>7} "
                    f"{row.get('median_ms', float('nan')):10.3f} ms launched "
                    f"{row.get('graphed_median_ms', float('nan')):10.3f} ms graphed"
                )
                rows.append({**row, **env})
        del q, k, v
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", choices=["leaderboard", "sweep"])
    p.add_argument("--warmup-ms", type=int, default=1000)
    p.add_argument("--rep-ms", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds of the implementations, per pass")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--seq-lengths", type=int_list, default=[128, 1024])
    p.add_argument("--implementations", default="ours_triton,sdpa_flash,sdpa_cudnn")
    p.add_argument(
        "--flat-within",
        type=float,
        default=2.0,
        help="sweep: written on the rows for the report, which calls a fused kernel's launched times flat (the "
        "host's) up to the sequence where they pass this multiple of its time at the shortest",
    )
    p.add_argument(
        "--launched-within",
        type=float,
        default=1.25,
        help="sweep: written on the rows for the report, which states where our launched forward + backward "
        "is within this multiple of the faster SDPA backend's",
    )
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    study = f"flash_{args.experiment}"
    if not torch.cuda.is_available():
        device = torch.device("cpu")
        rows = [
            {
                "study": study,
                "status": "skipped",
                "note": "needs a CUDA GPU (do_bench times with CUDA events)",
                **fingerprint(device),
            }
        ]
    elif args.experiment == "leaderboard":
        rows = leaderboard_rows(args.warmup_ms, args.rep_ms, args.rounds)
    else:
        rows = sweep_rows(
            args.dtype,
            args.head_dim,
            args.seq_lengths,
            args.implementations.split(","),
            args.warmup_ms,
            args.rep_ms,
            args.rounds,
        )
    if args.experiment == "sweep":
        rows = [{**row, "flat_within": args.flat_within, "launched_within": args.launched_within} for row in rows]
    write_rows(rows, args.out)


if __name__ == "__main__":
    run_study(main)
