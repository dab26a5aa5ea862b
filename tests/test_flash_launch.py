"""FlashAttentionTriton's launch path: plans per signature of the inputs, the Launcher that calls a
compiled kernel directly after its first call, and the ops torch.compile sees.

On a CPU the kernels run through Triton's interpreter (conftest), where every launch goes through
Triton; the plans, their keys and the ops are the same. On a GPU the direct launches run too.
"""

import math
import os

import pytest
import torch
import triton
import triton.language as tl

from lmperf.kernels import flash_attention
from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.kernels.triton_launcher import Launcher, compile_configs

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = flash_attention.INTERPRET
HOPPER = DEVICE == "cuda" and not INTERPRET and torch.cuda.get_device_capability()[0] == 9


def reference(q, k, v, is_causal):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def relative_error(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def leaves(shape, dtype, seed, layout=None):
    """Three random leaves of ``shape``; ``layout`` (a permutation) lays them out in another order
    of the same shape (the model's (batch, seq, heads, d) projections seen as (batch, heads, seq, d))."""
    g = torch.Generator().manual_seed(seed)
    if layout is None:
        return [torch.randn(shape, generator=g).to(DEVICE, dtype).requires_grad_() for _ in range(3)]
    stored = [shape[i] for i in layout]
    inverse = [layout.index(i) for i in range(len(shape))]
    return [
        torch.randn(stored, generator=g).to(DEVICE, dtype).permute(inverse).detach().requires_grad_() for _ in range(3)
    ]


def forward_backward(fn, q, k, v, grad, causal):
    for t in (q, k, v):
        t.grad = None
    out = fn(q, k, v, causal)
    out.backward(grad)
    return [out.detach().clone()] + [t.grad.clone() for t in (q, k, v)]


@pytest.fixture
def fresh_plans(monkeypatch):
    """No plans from other tests, and none of this test's left for them."""
    monkeypatch.setattr(flash_attention, "_PLANS", {})


DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


@pytest.mark.parametrize(
    "shape, causal",
    [((1, 256, 64), True), ((2, 3, 128, 64), False), ((1, 37, 64), True)],
    ids=["sweep-like", "heads", "ragged"],
)
def test_a_planned_call_repeats_the_first_and_matches_float64(shape, causal, fresh_plans):
    """The first call of a signature goes through Triton (compiling, tuning, planning), later ones
    through its plan: the same numbers, bit for bit (the default backward is deterministic where
    the five-product one does not run), and float64's within bf16/fp32 rounding."""
    q, k, v = leaves(shape, DTYPE, seed=len(shape))
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(DEVICE, DTYPE)
    first = forward_backward(FlashAttentionTriton.apply, q, k, v, grad, causal)
    planned = len(flash_attention._PLANS)
    again = forward_backward(FlashAttentionTriton.apply, q, k, v, grad, causal)
    assert len(flash_attention._PLANS) == planned == 2  # a forward plan and a backward plan, made once
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = reference(q64, k64, v64, causal)
    ref.backward(grad.double())
    tol = 2e-2 if DTYPE == torch.bfloat16 else 1e-4
    for x, r in zip(again, (ref, q64.grad, k64.grad, v64.grad)):
        assert relative_error(x, r) < 2 * tol


def test_each_signature_gets_its_own_plan(fresh_plans):
    """Another shape, and the same shape laid out with other strides, are other signatures: each is
    planned for itself, and each call after the first still matches float64. A plan reused across
    layouts would read the second layout with the first's strides."""
    causal = True
    for shape, layout in [((2, 2, 128, 64), None), ((2, 2, 128, 64), (0, 2, 1, 3)), ((1, 2, 256, 64), None)]:
        q, k, v = leaves(shape, DTYPE, seed=shape[2], layout=layout)
        grad = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(DEVICE, DTYPE)
        for _ in range(2):
            out, dq, dk, dv = forward_backward(FlashAttentionTriton.apply, q, k, v, grad, causal)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref = reference(q64, k64, v64, causal)
        ref.backward(grad.double())
        tol = 2e-2 if DTYPE == torch.bfloat16 else 1e-4
        for x, r in zip((out, dq, dk, dv), (ref, q64.grad, k64.grad, v64.grad)):
            assert relative_error(x, r) < 2 * tol
    assert len(flash_attention._PLANS) == 6


def test_the_compiled_wrapper_computes_what_the_direct_call_does(fresh_plans):
    """Under torch.compile each pass is one op (lmperf::flash_attention_forward / _backward) that runs
    the same plans: the same output and gradients as the direct call, bit for bit, in both the
    (batch, seq, d) and the model's merged-heads form. On a CPU the graph runs through aot_eager
    (inductor would compile C++ around two opaque ops)."""
    backend = "inductor" if DEVICE == "cuda" else "aot_eager"
    torch._dynamo.reset()
    batch, heads, n, d = 2, 2, 128, 64
    for merged in (False, True):
        shape = (batch, heads, n, d) if merged else (batch * heads, n, d)
        q, k, v = leaves(shape, DTYPE, seed=3, layout=(0, 2, 1, 3) if merged else None)
        out_shape = (batch, n, heads * d) if merged else shape
        grad = torch.randn(out_shape, generator=torch.Generator().manual_seed(4)).to(DEVICE, DTYPE)
        direct = lambda q, k, v, c: FlashAttentionTriton.apply(q, k, v, c, merged)  # noqa: E731
        compiled = torch.compile(direct, backend=backend, fullgraph=True)
        expected = forward_backward(direct, q, k, v, grad, True)
        for _ in range(2):
            got = forward_backward(compiled, q, k, v, grad, True)
            for a, b in zip(expected, got):
                assert a.shape == b.shape and a.stride() == b.stride()
                assert torch.equal(a, b)
    torch._dynamo.reset()


def test_the_ops_fake_outputs_are_laid_out_as_the_real_ones():
    """The fake implementations tell the compiler the outputs' shapes and strides without running:
    they must match what the kernels' plans allocate, or compiled code would misread them."""
    batch, heads, n, d = 2, 3, 128, 64
    q, k, v = (t.detach() for t in leaves((batch, heads, n, d), DTYPE, seed=5, layout=(0, 2, 1, 3)))
    real = torch.ops.lmperf.flash_attention_forward(q, k, v, True)
    out = flash_attention._heads_view(real[0], q)
    grad = torch.randn_like(out)
    real_grads = torch.ops.lmperf.flash_attention_backward(q, k, v, out, real[1], grad, True)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fq, fk, fv, fout, fl, fgrad = (mode.from_tensor(t) for t in (q, k, v, out, real[1], grad))
        fake = torch.ops.lmperf.flash_attention_forward(fq, fk, fv, True)
        fake_grads = torch.ops.lmperf.flash_attention_backward(fq, fk, fv, fout, fl, fgrad, True)
    for a, b in zip((*real, *real_grads), (*fake, *fake_grads)):
        assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype)


@triton.jit
def _scaled_copy(X, Y, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * factor, mask=offs < n)


_tuned_copy = triton.autotune(
    configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"], do_bench=lambda *a, **k: 1.0
)(_scaled_copy)


@pytest.mark.parametrize("tuned", [False, True], ids=["plain", "autotuned"])
def test_launcher_repeats_the_launch_on_new_storage(tuned):
    """Launcher: the first call goes through Triton, later ones straight to the compiled kernel, on
    the grid the first resolved (an autotuned kernel's from the config it chose). Each call reads
    and writes the tensors it is given."""
    n = 1000
    if tuned:
        launch = Launcher(_tuned_copy, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), interpret=INTERPRET)
    else:
        launch = Launcher(_scaled_copy, (triton.cdiv(n, 128),), interpret=INTERPRET, BLOCK=128)
    for factor in (2.0, 3.0, -0.5):
        x = torch.randn(n, device=DEVICE)
        y = torch.full_like(x, float("nan"))
        launch(x, y, n, factor)
        assert torch.equal(y, x * factor)
    assert (launch.compiled is None) == INTERPRET
    if not INTERPRET:  # X and Y, passed by address after the first launch
        assert launch.pointers == [0, 1]


_warps_tuned_copy = triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (1, 2)], key=["n", "BLOCK"], do_bench=lambda *a, **k: 1.0
)(triton.jit(_scaled_copy.fn))


def test_configs_are_compiled_ahead_only_where_the_autotuner_is_about_to_time_them(monkeypatch):
    """compile_configs warms every config up for a key the autotuner has not tuned; for a tuned key
    (the autotuner then compiles only its pick), an autotuner that reads its picks from disk, or a
    kernel that is not autotuned, it does nothing."""
    warmed = []
    monkeypatch.setattr(_tuned_copy, "warmup", lambda *args, **kwargs: warmed.append(args[2]))
    monkeypatch.setattr(_tuned_copy, "cache", {})
    n = 1000
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    x = torch.randn(n, device=DEVICE)
    y = torch.empty_like(x)
    _tuned_copy[grid](x, y, n, 2.0)  # tunes the key of n = 1000
    for size in (n, n - 1):
        compile_configs(_tuned_copy, grid, (x, y, size, 2.0), {})
    assert warmed == [n - 1]
    monkeypatch.setattr(_tuned_copy, "cache_results", True)
    compile_configs(_tuned_copy, grid, (x, y, n - 2, 2.0), {})
    compile_configs(_scaled_copy, grid, (x, y, n - 2, 2.0), {"BLOCK": 64})
    assert warmed == [n - 1]
    # a key that holds a constexpr the caller binds (as our kernels' D0, D1 and IS_CAUSAL)
    blocks = []
    monkeypatch.setattr(_warps_tuned_copy, "warmup", lambda *args, **kwargs: blocks.append(kwargs["BLOCK"]))
    monkeypatch.setattr(_warps_tuned_copy, "cache", {})
    _warps_tuned_copy[(triton.cdiv(n, 64),)](x, y, n, 2.0, BLOCK=64)
    for block in (64, 128):
        compile_configs(_warps_tuned_copy, (triton.cdiv(n, block),), (x, y, n, 2.0), {"BLOCK": block})
    assert blocks == [128]


_side_by_side_copy = triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (1, 2)],
    key=["n"],
    do_bench=lambda *a, **k: 1.0,
)(triton.jit(_scaled_copy.fn))


@pytest.mark.skipif(DEVICE != "cuda" or INTERPRET, reason="compiles for a GPU; the interpreter compiles nothing")
def test_an_autotuned_kernels_configs_compile_side_by_side(monkeypatch):
    """The first call of an autotuned kernel compiles each of its configs once, in threads side by
    side (where the process may use more than one CPU: the first two compiles wait for each other,
    so one thread alone fails), before the autotuner times them: the autotuner finds them compiled
    and compiles nothing itself. The launch still computes its result."""
    import threading

    jit = _side_by_side_copy.fn
    jit.device_caches[triton.runtime.driver.active.get_current_device()]  # sets jit.compile, once per device
    compiled_on, compile, lock = [], jit.compile, threading.Lock()
    side_by_side = threading.Barrier(2 if len(os.sched_getaffinity(0)) > 1 else 1, timeout=60)

    def recorded(*args, **kwargs):
        with lock:
            compiled_on.append(threading.get_ident())
            first_two = len(compiled_on) <= 2
        if first_two:
            side_by_side.wait()
        return compile(*args, **kwargs)

    monkeypatch.setattr(jit, "compile", recorded)
    n = 1000
    launch = Launcher(_side_by_side_copy, lambda meta: (triton.cdiv(n, meta["BLOCK"]),))
    x = torch.randn(n, device=DEVICE)
    y = torch.full_like(x, float("nan"))
    launch(x, y, n, 2.0)
    assert torch.equal(y, x * 2.0)
    assert len(compiled_on) == len(_side_by_side_copy.configs)
    assert threading.get_ident() not in compiled_on and not side_by_side.broken
    if len(os.sched_getaffinity(0)) > 1:
        assert len(set(compiled_on)) > 1


@triton.jit
def _doubled_rows(X_desc, Y, n, BLOCK: tl.constexpr, D: tl.constexpr):
    row = tl.program_id(0) * BLOCK
    rows = row + tl.arange(0, BLOCK)
    tl.store(Y + rows[:, None] * D + tl.arange(0, D)[None, :], X_desc.load([row, 0]) * 2, mask=rows[:, None] < n)


def test_launcher_builds_each_calls_descriptor_over_its_own_tensor():
    """A kernel that takes a tensor descriptor: the Launcher is given the descriptor without a base,
    each call passes a tensor, and the kernel reads that tensor. On a Hopper GPU the launches after
    the first pass descriptors encoded once per address (Launcher.encoded); a stale one would read
    the last call's storage."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    n, d, block = 100, 16, 32
    template = TensorDescriptor(torch.empty(n, d, device=DEVICE), [n, d], [d, 1], [block, d])
    template.base = None
    launch = Launcher(_doubled_rows, (triton.cdiv(n, block),), interpret=INTERPRET, descriptors={0: template},
                      BLOCK=block, D=d)  # fmt: skip
    kept = [torch.randn(n, d, device=DEVICE) for _ in range(2)]
    for x in [torch.randn(n, d, device=DEVICE) for _ in range(3)] + kept + kept:
        y = torch.zeros_like(x)
        launch(x, y, n)
        assert torch.equal(y, x * 2)
    if HOPPER:  # read by TMA: encoded, one per address it saw after compiling (two fresh, then kept)
        assert launch.metas is not None
        assert len(launch.tensor_maps) == len({x.data_ptr() for x in kept}) + 2


def test_launcher_encodes_each_address_once_and_splices_it_in_place():
    """Launcher.encoded, with a stand-in for Triton's encoder: each descriptor's tensor is replaced by
    its encoding (the map, then shape and strides) where it stood, other arguments are kept in order,
    and an address seen before is not encoded again."""

    class Template:  # over() copies its fields and sets the tensor as base
        pass

    launch = Launcher(_doubled_rows, (1,), descriptors={3: Template(), 0: Template()})
    calls = []

    def encode(described, meta):
        calls.append((described.base.data_ptr(), meta))
        return [f"map {meta} {described.base.data_ptr()}", "shape", "stride"]

    launch.metas, launch.encode, launch.tensor_maps = ["m0", "m3"], encode, {}
    a, b = torch.zeros(4), torch.zeros(4)
    for _ in range(2):
        args = launch.encoded((a, "x", 7, b, "y"))
        assert args == [f"map m0 {a.data_ptr()}", "shape", "stride", "x", 7, f"map m3 {b.data_ptr()}", "shape",
                        "stride", "y"]  # fmt: skip
    assert calls == [(a.data_ptr(), "m0"), (b.data_ptr(), "m3")]


def test_launcher_passes_tensors_as_their_addresses():
    """After the first launch, a tensor argument reaches the compiled launcher as its address (an
    integer, which Triton's launcher takes without asking the driver about it), at the position it
    was given; a descriptor's tensor is still encoded, other arguments are passed as they are."""

    class Template:
        pass

    launch = Launcher(_doubled_rows, (1,), descriptors={1: Template()})
    received = []
    launch.compiled, launch.pointers, launch.metas, launch.tensor_maps = object(), [0, 3], ["m1"], {}
    launch.encode = lambda described, meta: [f"map {meta} {described.base.data_ptr()}"]
    launch.launch = lambda *passed: received.append(passed)
    launch.grid_xyz, launch.stream, launch.device, launch.fixed, launch.unbound = (1, 1, 1), str, 0, ("f",), (None,)
    a, b, c = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    launch(a, b, 7, c)
    assert received == [(1, 1, 1, "0", "f", a.data_ptr(), f"map m1 {b.data_ptr()}", 7, c.data_ptr(), None)]


@pytest.mark.skipif(not HOPPER, reason="the Hopper kernels read Q, K, V by TMA on an sm_90 GPU only")
def test_the_hopper_plans_pass_encoded_descriptors(fresh_plans):
    """Forward and backward on Hopper's Gluon kernels: after their first launch, their Launchers pass
    descriptors encoded once per address, not through Triton's per-call wrapper (which a Triton whose
    launcher changed would bring back, silently)."""
    shape = (1, 4, 4096, 64)  # 128 programs of 128 keys: the five-product backward's smallest at d = 64
    q, k, v = leaves(shape, torch.bfloat16, seed=9)
    grad = torch.ones(shape, device=DEVICE, dtype=torch.bfloat16)
    for _ in range(2):
        forward_backward(FlashAttentionTriton.apply, q, k, v, grad, True)
    mains = [plan.launch.main for plan in flash_attention._PLANS.values() if plan.kernel == "gluon"]
    assert len(mains) == 2 and all(main.metas is not None and main.tensor_maps for main in mains)


def test_no_gradient_no_autograd_function(fresh_plans, monkeypatch):
    """flash_attention skips the autograd.Function where no gradient can flow (no_grad, or inputs
    that do not require grad) and runs the same plan: the same output, bit for bit; where a gradient
    can flow it is FlashAttentionTriton.apply, with a graph node. The model's call
    (lmperf.attention.flash_triton_attention) goes through it."""
    from lmperf.attention import flash_triton_attention

    q, k, v = leaves((2, 3, 128, 64), DTYPE, seed=6, layout=(0, 2, 1, 3))
    expected = FlashAttentionTriton.apply(q, k, v, True, True).detach()
    applied = []
    apply = FlashAttentionTriton.apply
    monkeypatch.setattr(FlashAttentionTriton, "apply", lambda *args: applied.append(1) or apply(*args))
    with_grad = flash_attention.flash_attention(q, k, v, True, True)
    assert with_grad.grad_fn is not None and len(applied) == 1
    with torch.no_grad():
        assert torch.equal(flash_attention.flash_attention(q, k, v, True, True), expected)
        model_call = flash_triton_attention(q, k, v, is_causal=True)
    detached = [t.detach() for t in (q, k, v)]
    plain = flash_attention.flash_attention(*detached, True, False)
    assert len(applied) == 1  # none of the three calls without a gradient went through the Function
    assert torch.equal(plain, expected.view(2, 128, 3, 64).transpose(1, 2))
    assert torch.equal(model_call, plain)
    assert len(flash_attention._PLANS) == 1  # one forward plan served every call
    with torch.autograd.forward_ad.dual_level():  # the Function refuses dual tensors; no silent drop
        dual = torch.autograd.forward_ad.make_dual(detached[0], torch.ones_like(detached[0]))
        with pytest.raises(RuntimeError):
            flash_attention.flash_attention(dual, *detached[1:], True, False)


def test_the_models_call_compiles_to_one_graph(fresh_plans):
    """The model's call (lmperf.attention.flash_triton_attention) under torch.compile with
    fullgraph=True, with and without a gradient: it takes the autograd.Function path there (the
    compiler traces it to the ops), and gives the direct call's output and gradients bit for bit."""
    from lmperf.attention import flash_triton_attention

    torch._dynamo.reset()
    backend = "inductor" if DEVICE == "cuda" else "aot_eager"
    compiled = torch.compile(flash_triton_attention, backend=backend, fullgraph=True)
    q, k, v = leaves((2, 2, 128, 64), DTYPE, seed=7, layout=(0, 2, 1, 3))
    grad = torch.randn(2, 2, 128, 64, generator=torch.Generator().manual_seed(8)).to(DEVICE, DTYPE)
    expected = forward_backward(flash_triton_attention, q, k, v, grad, True)
    got = forward_backward(compiled, q, k, v, grad, True)
    for a, b in zip(expected, got):
        assert torch.equal(a, b)
    with torch.no_grad():  # compiled, the call without a gradient is the Function's op too: one graph
        assert torch.equal(compiled(q, k, v, is_causal=True), expected[0])
    torch._dynamo.reset()
