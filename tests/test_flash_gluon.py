"""The Hopper (Gluon) forward and backward: where they are chosen, how they address heads, and
their numbers on an H100.

Gluon kernels do not run in Triton's interpreter. On a CPU these tests check the choice and the
TMA addressing; the sm_90 build is checked by test_flash.py's compile test; on an sm_90 GPU the
kernel is checked against float64.
"""

import math

import pytest
import torch

from lmperf.kernels import flash_attention, flash_attention_gluon, flash_attention_gluon_backward
from lmperf.kernels.flash_attention import FlashAttentionTriton

BF16 = torch.bfloat16
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def model_layout(batch, heads, n, d, dtype=torch.bfloat16, device="cpu", seed=0):
    """q, k, v as the model passes them: (batch, heads, n, d) views of (batch, n, 3, heads, d)."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(batch, n, 3, heads, d, generator=g).to(device, dtype)
    return [t.transpose(1, 2) for t in qkv.unbind(2)]


@pytest.mark.parametrize(
    "x",
    [
        torch.zeros(2, 3, 256, 64, dtype=BF16),  # contiguous heads
        torch.zeros(2, 256, 3, 64, dtype=BF16).transpose(1, 2),  # the model's projections
        model_layout(2, 3, 256, 64)[1],  # one of q, k, v split from a fused projection
        torch.zeros(3, 256, 64, dtype=BF16).unsqueeze(1),  # (batch, n, d) as one head
    ],
    ids=["contiguous", "seq-major", "fused-qkv", "no-heads"],
)
def test_tma_rows_address_every_head(x):
    """Head (b, h) is rows row0 + n, columns col0 .. col0 + d of x seen as rows of stride(2): the
    numbers the kernel's _origin turns into TMA coordinates."""
    x.copy_(torch.randn(x.shape))
    assert flash_attention_gluon._addressable(x)
    desc, rows_per_batch, stride_h, row_len = flash_attention_gluon._as_rows(x, 64)
    assert desc.block_shape == [64, x.shape[-1]]
    flat = x.as_strided((x.untyped_storage().nbytes() // x.element_size() - x.storage_offset(),), (1,))
    batch, heads, n, d = x.shape
    cols = torch.arange(d)
    for b in range(batch):
        for h in range(heads):
            row0, col0 = b * rows_per_batch + h * stride_h // row_len, h * stride_h % row_len
            rows = torch.arange(row0, row0 + n)[:, None]
            assert torch.equal(flat[rows * row_len + col0 + cols], x[b, h])


def test_gluon_path_refuses_what_it_cannot_run():
    x = torch.zeros(1, 2, 256, 64, dtype=torch.bfloat16)
    assert "sm_90" in flash_attention_gluon.unsupported(x, x, x)  # not on a CPU
    rows_of_68 = torch.zeros(1, 2, 256, 68)[..., :64]  # not 16-byte aligned
    assert not flash_attention_gluon._addressable(rows_of_68)


@pytest.mark.skipif(not HOPPER, reason="the Gluon forward needs an sm_90 GPU")
@pytest.mark.parametrize("n", [256, 2560], ids=["fwd_kernel", "fwd_ws_kernel"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [True, False])
def test_gluon_attention_matches_float64_forward_and_backward(n, d, causal, monkeypatch):
    monkeypatch.setattr(flash_attention_gluon_backward, "MIN_KEYS", {d: 0})  # the five-product backward at any size
    monkeypatch.setattr(flash_attention_gluon_backward, "MIN_PROGRAMS", {d: 0})
    monkeypatch.setattr(flash_attention, "_PLANS", {})  # plans made under the size rule as it is, kept here
    q, k, v = (t.requires_grad_() for t in model_layout(2, 3, n, d, torch.bfloat16, "cuda", seed=d))
    assert flash_attention_gluon.unsupported(q, k, v) == ""  # the path under test is the one taken
    splits = flash_attention_gluon.key_splits(
        2 * 3 * n // flash_attention_gluon.BLOCK_M, n // 128, flash_attention_gluon._sm_count(q.device)
    )
    assert flash_attention_gluon.warp_specialized(n, splits) == (n > flash_attention_gluon.SHORT)
    o = FlashAttentionTriton.apply(q, k, v, causal)
    L = o.grad_fn.saved_tensors[0]
    grad_out = torch.randn_like(o)
    o.backward(grad_out)

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = q64 @ k64.transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ v64
    ref.backward(grad_out.double())
    assert (L.double() - torch.logsumexp(s, -1)).abs().max() < 1e-3
    for x, r in ((o, ref), (q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert ((x.double() - r).norm() / r.norm()).item() < 2e-2
    five_products = flash_attention_gluon_backward.unsupported(q, k, v, grad_out) == ""
    assert five_products  # the backward under test, at both head sizes
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    again = FlashAttentionTriton.apply(q, k, v, causal)
    again.backward(grad_out)
    assert torch.equal(again, o)  # the forward is deterministic
    if not five_products:  # so is the portable backward; the Hopper one adds dQ's shares in no fixed order
        assert all(torch.equal(t.grad, g) for t, g in zip((q, k, v), grads))


@pytest.mark.skipif(not HOPPER, reason="the Gluon backward needs an sm_90 GPU")
def test_deterministic_algorithms_give_repeatable_gradients():
    """Under torch.use_deterministic_algorithms, the rows that would take the five-product backward
    take the portable one, and two backwards agree bit for bit."""
    q, k, v = (t.requires_grad_() for t in model_layout(1, 2, 8192, 64, torch.bfloat16, "cuda"))
    grad_out = torch.randn_like(q)
    assert flash_attention_gluon_backward.unsupported(q, k, v, grad_out) == ""
    FlashAttentionTriton.apply(q, k, v, True).backward(grad_out)  # planned with the five products first
    for t in (q, k, v):
        t.grad = None
    torch.use_deterministic_algorithms(True)
    try:
        assert "deterministic" in flash_attention_gluon_backward.unsupported(q, k, v, grad_out)
        grads = []
        for _ in range(2):
            FlashAttentionTriton.apply(q, k, v, True).backward(grad_out)
            grads.append([t.grad for t in (q, k, v)])
            for t in (q, k, v):
                t.grad = None
    finally:
        torch.use_deterministic_algorithms(False)
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@pytest.mark.skipif(not HOPPER, reason="the Gluon forward needs an sm_90 GPU")
def test_gluon_forward_copies_a_view_that_tma_cannot_align():
    """A view starting 2 bytes into its storage is not 16-byte aligned: it is copied, not misread."""
    base = torch.randn(2 * 3 * 256 * 64 + 1, device="cuda").to(torch.bfloat16)
    q = base[1:].view(2, 3, 256, 64)
    assert flash_attention_gluon.unsupported(q, q, q) == "" and q.data_ptr() % 16
    o = FlashAttentionTriton.apply(q, q, q, True)
    s = q.double() @ q.double().transpose(-1, -2) / 8
    s = s.masked_fill(torch.ones(256, 256, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ q.double()
    assert ((o.double() - ref).norm() / ref.norm()).item() < 2e-2


def test_the_gluon_layout_check_does_not_break_a_compiled_graph():
    """unsupported() runs under torch.compile in every block, on projections made inside the graph.
    Its layout check must trace without a graph break: storage_offset() of such an intermediate
    split each compiled block on an H100 (4.0 ms against SDPA's 2.7 ms for one launched block)."""

    def check(x):
        q = (x * 2).transpose(1, 2)  # an intermediate, as the model's q, k, v are
        return q * int(flash_attention_gluon._addressable(q))

    explanation = torch._dynamo.explain(check)(torch.zeros(1, 256, 2, 64, dtype=BF16))
    assert explanation.graph_break_count == 0, explanation.break_reasons


@pytest.mark.parametrize(
    "n, programs, d, five",
    [(2048, 1024, 64, False), (1024, 640, 64, False), (4096, 32, 64, False), (4096, 128, 64, True)]
    + [(4096, 2048, 64, True), (8192, 64, 64, False), (8192, 128, 64, True), (16384, 128, 64, True)]
    + [(1024, 512, 128, False), (2048, 1024, 128, True), (4096, 2048, 128, True), (16384, 128, 128, False)]
    + [(16384, 1024, 128, True), (32768, 256, 128, True), (4096, 32, 128, False)],
)
def test_the_five_product_backward_is_taken_where_it_was_measured_faster(n, programs, d, five):
    """The sizes of the measurements behind flash_attention_gluon_backward.pays. d = 64 (H100):
    4 x 16 x 2048 and the model's 4 x 20 x 1024 (slower), the batch-1 sweep at 4096 keys (32
    programs), 1 x 4 x 4096, 4 x 16 x 4096, 1 x 1 x 8192 (64 programs: slower), 1 x 2 x 8192 and
    1 x 1 x 16384. d = 128 (H200): 4 x 16 x 1024 (slower), 4 x 16 x 2048 and 4096, batch 1 at
    16384 keys (slower) and 32768, 8 x 1 x 16384, and the sweep's 4096 keys."""
    assert flash_attention_gluon_backward.pays(n, programs, d) == five


def test_the_size_rule_refuses_a_head_size_it_was_not_measured_at():
    with pytest.raises(ValueError, match="head size 80"):
        flash_attention_gluon_backward.pays(4096, 256, 80)


@pytest.mark.parametrize("n, splits, ws", [(16384, 1, True), (2560, 1, True), (2048, 1, False), (4096, 2, False)])
def test_long_unsplit_rows_take_the_warp_specialized_kernel(n, splits, ws):
    """Rows longer than SHORT take two consumer warpgroups a program (variant 18), unless their keys
    are split, which only _fwd_kernel does."""
    assert flash_attention_gluon.warp_specialized(n, splits) == ws


@pytest.mark.parametrize(
    "n, d, tiling",
    [(128, 64, (64, 2)), (2048, 64, (64, 2)), (4096, 64, (128, 2)), (16384, 64, (128, 2)), (1024, 128, (64, 2))],
)
def test_short_sequences_take_64_key_tiles_at_d64(n, d, tiling):
    """_fwd_kernel's tiles: the model's contexts (up to 2048 keys) take 64-key tiles in 2 stages, longer
    (split) rows at d = 64 128-key tiles, d = 128 always 64 keys: the tilings measured fastest on an
    H100. Longer unsplit rows take _fwd_ws_kernel and its 128-key tiles instead."""
    assert flash_attention_gluon.tiling(n, d) == tiling


@pytest.mark.parametrize(
    "programs, longest, splits",
    [(64, 32, 4), (32, 16, 4), (128, 64, 2), (96, 1, 1), (768, 8, 1), (64, 4, 1)],
    ids=["seq4096-d64", "seq2048-d64", "seq8192-d64", "model-ctx128", "model-ctx1024", "short-rows"],
)
def test_keys_are_split_only_where_the_grid_leaves_sms_idle(programs, longest, splits):
    assert flash_attention_gluon.key_splits(programs, longest, sms=132) == splits


@pytest.mark.parametrize("causal", [True, False])
def test_split_results_combine_to_attention_in_float64(causal):
    """_combine against float64: partial results over each split's key tiles, as _fwd_kernel leaves
    them, give softmax(QK^T)V and its logsumexp. Splits without key tiles hold NaN: never read."""
    bh, n, d, splits, key_tile, rows = 2, 512, 64, 4, 128, flash_attention_gluon.BLOCK_M
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(bh, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the interpreter runs it on a CPU
    O_part = torch.full((splits, bh, n, d), float("nan"))
    L_part = torch.full((splits, bh, n), float("nan"))
    for q0 in range(0, n, rows):
        n_tiles = -(-(q0 + rows) // key_tile) if causal else n // key_tile
        chunk = -(-n_tiles // splits)
        for split in range(splits):
            lo, hi = split * chunk * key_tile, min(split * chunk + chunk, n_tiles) * key_tile
            if lo >= hi:
                continue
            part = s[:, q0 : q0 + rows, lo:hi]
            O_part[split, :, q0 : q0 + rows] = torch.softmax(part, -1) @ v[:, lo:hi]
            L_part[split, :, q0 : q0 + rows] = torch.logsumexp(part, -1) / math.log(2)
    out, lse = torch.empty(bh, n, d, device=device), torch.empty(bh, n, device=device)
    flash_attention_gluon._combine[(n // rows, bh)](
        O_part.float().to(device), L_part.float().to(device), out, lse, n, 1, *out.unsqueeze(1).stride()[:3],
        BLOCK_N=key_tile, IS_CAUSAL=causal, SPLITS=splits, D=d, BLOCK_M=rows,
    )  # fmt: skip
    ref = torch.softmax(s, -1) @ v
    assert ((out.cpu().double() - ref).norm() / ref.norm()).item() < 1e-5
    assert (lse.cpu().double() - torch.logsumexp(s, -1)).abs().max().item() < 1e-4


@pytest.mark.skipif(not HOPPER, reason="the Gluon forward needs an sm_90 GPU")
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [True, False])
def test_split_keys_forward_matches_float64(d, causal):
    """Batch 1, one head, seq 4096: the grid the sweep runs, where the keys are split."""
    n = 4096
    q, k, v = model_layout(1, 1, n, d, torch.bfloat16, "cuda", seed=d)
    programs, longest = n // flash_attention_gluon.BLOCK_M, n // flash_attention_gluon.tiling(n, d)[0]
    assert flash_attention_gluon.key_splits(programs, longest, flash_attention_gluon._sm_count(q.device)) > 1
    o = FlashAttentionTriton.apply(q, k, v, causal)
    L = torch.empty(1, 1, n, device="cuda")
    flash_attention_gluon.forward(q, k, v, torch.empty_like(o), L, causal)
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ v.double()
    assert ((o.double() - ref).norm() / ref.norm()).item() < 2e-2
    assert (L.double() - torch.logsumexp(s, -1)).abs().max().item() < 1e-3
    assert torch.equal(FlashAttentionTriton.apply(q, k, v, causal), o)  # deterministic
