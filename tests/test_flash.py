"""FlashAttention-2 (PyTorch tiles and Triton kernels) against a float64 reference.

Without a GPU the Triton kernels run through TRITON_INTERPRET=1 (set in conftest), at small
shapes with 16 x 16 tiles so that many tiles, partial edge tiles and the causal diagonal are hit.
"""

import math
import re
import weakref

import pytest
import torch

from lmperf.kernels.flash_attention import FlashAttentionTriton, head_blocks
from lmperf.kernels.flash_attention_pytorch import FlashAttentionPyTorch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
IMPLEMENTATIONS = {"pytorch": FlashAttentionPyTorch, "triton": FlashAttentionTriton}
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}  # relative to the output's norm


def reference(q, k, v, is_causal):
    """O and L = logsumexp(S) in float64."""
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def relative_error(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def inputs(batch, n_q, n_k, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, n, d, generator=g).to(DEVICE, dtype).requires_grad_() for n in (n_q, n_k, n_k)]


CASES = [  # batch, n_queries, n_keys, d, causal
    (2, 37, 37, 16, True),
    (2, 37, 37, 16, False),
    (1, 64, 64, 32, True),  # exact tile multiples
    (2, 20, 45, 32, False),  # n_queries != n_keys
    (1, 32, 48, 16, False),  # n_queries != n_keys, both tile multiples (unmasked loads)
    (1, 50, 17, 64, False),
    (1, 33, 33, 80, True),  # the 2.7B model's head size: two column blocks, 64 + 16
    (1, 40, 40, 96, False),  # 64 + 32
    (2, 21, 21, 40, True),  # 32 + 16, the second block partly padding
]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("batch, n_q, n_k, d, causal", CASES)
def test_forward_and_backward_match_float64(impl, dtype, batch, n_q, n_k, d, causal):
    q, k, v = inputs(batch, n_q, n_k, d, dtype, seed=n_q * 1000 + d)
    o = IMPLEMENTATIONS[impl].apply(q, k, v, causal)
    saved_l = o.grad_fn.saved_tensors[0]
    grad_out = torch.randn_like(o)
    o.backward(grad_out)

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref_o, ref_l = reference(q64, k64, v64, causal)
    ref_o.backward(grad_out.double())

    tol = TOLERANCE[dtype]
    assert o.dtype == dtype and o.shape == (batch, n_q, d)
    assert relative_error(o, ref_o) < tol
    assert saved_l.dtype == torch.float32 and saved_l.shape == (batch, n_q)
    assert relative_error(saved_l, ref_l) < (1e-5 if dtype == torch.float32 else 1e-2)
    for grad, ref_grad in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert torch.isfinite(grad).all()
        assert relative_error(grad, ref_grad) < tol * 2


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_saves_exactly_l_q_k_v_o(impl):
    q, k, v = inputs(1, 24, 24, 16, torch.float32, seed=1)
    o = IMPLEMENTATIONS[impl].apply(q, k, v, True)
    saved = o.grad_fn.saved_tensors
    assert [tuple(t.shape) for t in saved] == [(1, 24), (1, 24, 16), (1, 24, 16), (1, 24, 16), (1, 24, 16)]
    assert saved[1] is q or torch.equal(saved[1], q)
    torch.testing.assert_close(saved[4], o)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_gradients_flow_when_output_is_partly_used(impl):
    q, k, v = inputs(2, 40, 40, 16, torch.float32, seed=2)
    o = IMPLEMENTATIONS[impl].apply(q, k, v, True)
    o[:, 5:12].sum().backward()  # dO: ones on a slice, zeros elsewhere

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref_o, _ = reference(q64, k64, v64, True)
    ref_o[:, 5:12].sum().backward()
    for grad, ref_grad in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert relative_error(grad, ref_grad) < 1e-4
    # causal: keys after the last used query get no gradient at all
    assert k.grad[:, 12:].abs().max() == 0 and v.grad[:, 12:].abs().max() == 0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_broadcast_gradient_of_a_sum(impl):
    """o.sum().backward() hands the kernels an expanded dO with zero strides."""
    q, k, v = inputs(1, 30, 30, 32, torch.float32, seed=3)
    IMPLEMENTATIONS[impl].apply(q, k, v, False).sum().backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    reference(q64, k64, v64, False)[0].sum().backward()
    assert relative_error(q.grad, q64.grad) < 1e-4


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_rejects_bad_shapes(impl):
    q, k, v = inputs(1, 8, 9, 16, torch.float32, seed=4)
    with pytest.raises(ValueError, match="causal"):
        IMPLEMENTATIONS[impl].apply(q, k, v, True)
    with pytest.raises(ValueError, match="batch, n, d"):
        IMPLEMENTATIONS[impl].apply(q[0], k[0], v[0], False)


def test_triton_rejects_a_dtype_it_has_no_kernels_for():
    q, k, v = inputs(1, 8, 8, 16, torch.float16, seed=5)
    with pytest.raises(ValueError, match="bf16 or fp32"):
        FlashAttentionTriton.apply(q, k, v, False)


def test_kernels_compile_for_h100_with_inductor_argument_types():
    """torch.compile hands Python floats to user Triton kernels as fp64; the kernels must still compile.

    Compiles for sm_90 without a GPU (Triton's bundled ptxas), in a process without the interpreter.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).with_name("compile_flash_sm90.py")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("shared=") == 17
    assert proc.stdout.count("kernel=_fwd_ws_kernel") == 3  # the long rows, d = 64 and 128, causal and not
    assert proc.stdout.count("bulk_reduce=True") == 3  # the backward's dQ: d = 64 causal and not, d = 128
    shared = [int(x) for x in re.findall(r"shared=(\d+)", proc.stdout)]
    assert max(shared) <= 232448  # an H100's shared memory a block: a compile does not check it, a launch does


@pytest.mark.parametrize(
    "d, blocks",
    [(16, (16, 0)), (8, (16, 0)), (64, (64, 0)), (80, (64, 16)), (96, (64, 32)), (112, (128, 0)), (128, (128, 0))],
)
def test_head_blocks_cover_the_head_with_the_least_padding(d, blocks):
    assert head_blocks(d) == blocks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_triton_takes_the_models_head_layout_without_copies(dtype):
    """(batch, heads, seq, d) views of (batch, seq, heads, d) projections, as the model passes
    them, give the float64 result; O comes back as such a view, so merging heads is free."""
    batch, heads, n, d = 2, 3, 37, 80
    g = torch.Generator().manual_seed(7)
    qkv = torch.randn(batch, n, 3, heads, d, generator=g).to(DEVICE, dtype)
    q, k, v = (t.transpose(1, 2).requires_grad_() for t in qkv.unbind(2))  # strided leaves, no copy
    o = FlashAttentionTriton.apply(q, k, v, True)
    assert o.shape == (batch, heads, n, d) and o.transpose(1, 2).is_contiguous()
    grad_out = torch.randn_like(o)
    o.backward(grad_out)

    q64, k64, v64 = (t.detach().double().reshape(batch * heads, n, d).requires_grad_() for t in (q, k, v))
    ref_o, _ = reference(q64, k64, v64, True)
    ref_o.backward(grad_out.double().reshape(batch * heads, n, d))
    tol = TOLERANCE[dtype]
    assert relative_error(o.reshape(batch * heads, n, d), ref_o) < tol
    for grad, ref_grad in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert relative_error(grad.reshape(batch * heads, n, d), ref_grad) < tol * 2


def test_triton_merged_heads_output_is_the_heads_merged_with_the_same_gradients():
    """merged_heads (what the model's attention asks for): O as (batch, seq, heads x d), its
    gradient taken in that shape, and the same numbers as the (batch, heads, seq, d) output."""
    batch, heads, n, d = 2, 3, 37, 80
    g = torch.Generator().manual_seed(11)
    qkv = torch.randn(batch, n, 3, heads * d, generator=g).to(DEVICE, torch.bfloat16)
    leaves = [[t.view(batch, n, heads, d).transpose(1, 2).detach().requires_grad_() for t in qkv.unbind(2)]]
    leaves.append([t.detach().requires_grad_() for t in leaves[0]])
    grad_merged = torch.randn(batch, n, heads * d, generator=g).to(DEVICE, torch.bfloat16)
    o = FlashAttentionTriton.apply(*leaves[0], True)
    merged = FlashAttentionTriton.apply(*leaves[1], True, True)
    assert merged.shape == (batch, n, heads * d) and merged.is_contiguous()
    assert torch.equal(merged, o.transpose(1, 2).reshape(batch, n, heads * d))
    o.backward(grad_merged.view(batch, n, heads, d).transpose(1, 2))
    merged.backward(grad_merged)
    for x, y in zip(*leaves):
        assert torch.equal(x.grad, y.grad)
    with pytest.raises(ValueError, match="merged_heads"):
        FlashAttentionTriton.apply(*(t.reshape(batch * heads, n, d) for t in leaves[0]), True, True)


@pytest.mark.parametrize(
    "shape, merged_heads",
    [((2, 37, 16), False), ((2, 3, 37, 16), False), ((2, 3, 37, 16), True)],
    ids=["3d", "heads", "merged-heads"],
)
def test_triton_forward_without_backward_frees_its_graph(shape, merged_heads):
    """A forward whose inputs need grad, its output dropped with no backward (an evaluation without
    no_grad, a host-time benchmark): the graph node and what it saved are freed at once. A saved view
    of the returned output made a reference cycle (notes/saved_view_cycle.py), and every such call
    leaked its outputs."""
    q, k, v = (torch.randn(shape).to(DEVICE, torch.bfloat16).requires_grad_() for _ in range(3))
    out = FlashAttentionTriton.apply(q, k, v, True, merged_heads)
    node = weakref.ref(out.grad_fn)
    del out
    assert node() is None


def test_leaderboard_implementations_take_turns_round_by_round():
    """A B C A B C ...: a slow stretch of the run hits every implementation alike, and round i of one
    pairs with round i of another."""
    from lmperf.studies.flash import interleaved_medians, round_columns

    calls = []
    timers = {name: (lambda n=name: calls.append(n) or float(len(calls))) for name in ("a", "b", "c")}
    times = interleaved_medians(timers, rounds=3)
    assert calls == ["a", "b", "c"] * 3
    assert times == {"a": [1.0, 4.0, 7.0], "b": [2.0, 5.0, 8.0], "c": [3.0, 6.0, 9.0]}
    columns = round_columns([2.0, 2.1, 1.9, 2.05, 1.95], prefix="graphed_")
    assert columns["graphed_median_ms"] == 2.0 and columns["graphed_round_ms"] == "2.0000;2.1000;1.9000;2.0500;1.9500"
    assert 1.9 <= columns["graphed_ci95_low_ms"] <= 2.0 <= columns["graphed_ci95_high_ms"] <= 2.1


@pytest.mark.parametrize("pass_", ["forward_backward", "backward"])
def test_the_implementations_of_a_pass_take_turns_and_one_that_cannot_sits_out(monkeypatch, pass_):
    """in_turns, with stand-ins for the timers: an implementation out of memory is an oom row and an
    SDPA backend that refuses the inputs a skipped row with torch's reason, and neither takes a turn;
    one whose call outlasts a round's repetition time is timed once, ahead of the rounds, with the
    whole time; the others take turns round by round, launched and then replayed, each row with its
    rounds; a pass that is not replayed (the backward alone) says why. Any other error is raised. The
    cost split counts each first call (it compiles and autotunes) as warm-up, every other call as timed."""
    import triton.testing

    from lmperf.measure import GraphUnavailable, phases
    from lmperf.studies import flash

    turns, trials = [], []

    def implementation(name, ms, error=None):
        def run(warm, rep, replay=False):
            if replay:
                return ms
            if warm == 1:  # the first call of each, before the rounds, is a trial
                trials.append(phases.current())
            else:
                turns.append(f"{name} {rep:g}")
                assert phases.current() == "timed"
            if error is not None:
                raise error
            return ms

        return run

    def graphed(attention, q, k, v, causal, pass_, pool):
        if pass_ == "backward":
            raise GraphUnavailable("the backward alone is not graphed")
        return lambda: turns.append("replay") or attention(1, 1, replay=True) / 2

    monkeypatch.setattr(flash, "time_pass", lambda attention, q, k, v, causal, pass_, warm, rep: attention(warm, rep))
    monkeypatch.setattr(flash, "graphed_pass", graphed)
    monkeypatch.setattr(flash, "attention_kernel", lambda name: "triton")
    monkeypatch.setattr(flash, "attention_tiles", lambda name: f"{name}'s picks")

    def do_bench(fn, warmup, rep, return_mode):
        assert phases.current() == "timed"
        return fn()

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 2**30)
    impls = {
        "ours_triton": implementation("ours", 1.0),
        "naive": implementation("naive", 9.0, torch.OutOfMemoryError("CUDA out of memory. Tried 4 GiB GPU 0")),
        "sdpa_flash": implementation("flash", 2.0, RuntimeError("No available kernel. Aborting execution.\nmore")),
        "sdpa_cudnn": implementation("cudnn", 3.0),
        "naive_compiled": implementation("slow", 40.0),  # longer than a round's 100 / 3 ms
    }
    q = k = v = torch.zeros(1, 128, 16)
    rows = flash.in_turns(impls, q, k, v, True, pass_, warmup_ms=25, rep_ms=100, rounds=3)
    replays = ["replay"] * 7 if pass_ == "forward_backward" else []
    assert turns == ["slow 100"] + ["ours 33.3333", "cudnn 33.3333"] * 3 + replays
    assert trials == ["warmup"] * 5
    assert rows["naive_compiled"]["rounds"] == 1 and rows["naive_compiled"]["median_ms"] == 40.0
    assert rows["naive"] == {"status": "oom", "note": "CUDA out of memory. Tried 4 GiB"}
    assert rows["sdpa_flash"] == {"status": "skipped", "note": "No available kernel. Aborting execution."}
    ours, cudnn = rows["ours_triton"], rows["sdpa_cudnn"]
    assert ours["rounds"] == 3 and ours["round_ms"] == "1.0000;1.0000;1.0000" and cudnn["median_ms"] == 3.0
    assert ours["attention_kernel"] == "triton" and ours["peak_mem_gib"] == 1.0
    assert ours["tiles"] == "flash_triton's picks" and "tiles" not in cudnn
    if pass_ == "forward_backward":
        assert ours["graphed_median_ms"] == 0.5 and ours["graphed_round_ms"] == "0.5000;0.5000;0.5000"
    else:
        assert math.isnan(ours["graphed_median_ms"]) and ours["graph_note"] == "the backward alone is not graphed"
    with pytest.raises(RuntimeError, match="an illegal memory access"):
        flash.in_turns(
            {"naive": implementation("naive", 1.0, RuntimeError("an illegal memory access"))},
            q,
            k,
            v,
            True,
            pass_,
            25,
            100,
            3,
        )


def test_flash_attention_4_is_an_anchor_only_where_installed():
    """FlashAttention-4 is optional: without the package (as in CI) its rows are skipped with the reason."""
    import importlib.util

    from lmperf.studies.flash import unavailable

    assert unavailable("ours_triton", "fp32") == "" and unavailable("sdpa_cudnn", "bf16") == ""
    assert unavailable("fa4", "fp32") == "FlashAttention-4 takes 16-bit inputs only"
    if importlib.util.find_spec("flash_attn") is None:
        assert unavailable("fa4", "bf16").startswith("flash-attn-4 is not installed")


def test_a_sweep_row_is_skipped_timed_or_out_of_memory_for_every_implementation_and_pass(monkeypatch):
    """sweep_rows, with a stand-in for in_turns: at each length every named implementation has a row
    for each pass. One that cannot run here (FlashAttention-4 not installed) and the tiled Python
    loop past its longest length are skipped rows with the reason and take no turn; the others' rows
    are what in_turns timed, and a pass that runs out of memory in its rounds is an oom row for each
    implementation that took it. Every row names the device it ran on."""
    from lmperf.studies import flash

    taken = []

    def in_turns(impls, q, k, v, causal, pass_, warmup_ms, rep_ms, rounds):
        taken.append((q.shape[1], pass_, tuple(impls)))
        if q.shape[1] > flash.PYTHON_LOOP_MAX_SEQ and pass_ == "backward":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB. GPU 0 has")
        return {name: {"median_ms": 1.0, "rounds": rounds} for name in impls}

    monkeypatch.setattr(flash, "in_turns", in_turns)
    names = ["ours_triton", "ours_pytorch", "sdpa_flash", "fa4"]
    monkeypatch.setattr(flash, "implementations", lambda: dict.fromkeys(names, "attention"))
    monkeypatch.setattr(flash, "unavailable", lambda name, dtype: "not installed" if name == "fa4" else "")
    long = 2 * flash.PYTHON_LOOP_MAX_SEQ
    rows = flash.sweep_rows("bf16", 16, [128, long], names, 25, 100, rounds=3, device=torch.device("cpu"))

    assert len(rows) == 2 * len(names) * len(flash.PASSES)
    assert taken == [(128, p, ("ours_triton", "ours_pytorch", "sdpa_flash")) for p in flash.PASSES] + [
        (long, p, ("ours_triton", "sdpa_flash")) for p in flash.PASSES
    ]
    by = {(r["seq"], r["implementation"], r["pass"]): r for r in rows}
    assert all(r["device_type"] == "cpu" and r["d"] == 16 and r["dtype"] == "bf16" for r in rows)
    for seq in (128, long):
        for pass_ in flash.PASSES:
            assert by[seq, "fa4", pass_]["status"] == "skipped" and by[seq, "fa4", pass_]["note"] == "not installed"
    assert by[128, "ours_pytorch", "forward"]["status"] == "ok" and by[128, "ours_pytorch", "forward"]["rounds"] == 3
    loop = by[long, "ours_pytorch", "forward"]
    assert (
        loop["status"] == "skipped"
        and loop["note"] == f"tiled Python loop; timed up to seq {flash.PYTHON_LOOP_MAX_SEQ}"
    )
    for name in ("ours_triton", "sdpa_flash"):
        assert by[long, name, "backward"]["status"] == "oom" and "out of memory" in by[long, name, "backward"]["note"]
        assert "median_ms" not in by[long, name, "backward"]
        assert (
            by[long, name, "forward_backward"]["status"] == "ok"
            and by[long, name, "forward_backward"]["median_ms"] == 1.0
        )
