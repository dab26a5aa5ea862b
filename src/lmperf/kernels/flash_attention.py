"""FlashAttention-2 in Triton: forward, and a backward without atomics (a dQ pass over query tiles,
which also stores each row's Delta = rowsum(O * dO), then a dK/dV pass over key tiles).

Shapes and saved tensors as in flash_attention_pytorch: Q (batch, n_queries, d); K, V (batch, n_keys, d);
saved exactly L (float32 logsumexp, (batch, n_queries)), Q, K, V, O. A heads axis after batch is
taken too, at any strides (FlashAttentionTriton says why). Any sequence length (edge
tiles are masked), any head size up to 128, fp32 and bf16. A head is held as one or two
power-of-two column blocks (head_blocks: d = 80 is 64 + 16), so the products do no work on padding.

Layout of the work follows Triton's fused-attention tutorial: one program per (query tile, batch x
head); scores in the base-2 domain (exp2, with log2(e) folded into the scale); causal work split
into tiles wholly below the diagonal (no mask) and those on it (masked); tiles wholly above the
diagonal are never visited, and the heaviest query tiles are launched first. The dK/dV pass works
on transposed scores (keys along rows) so that P^T and dS^T feed the next product straight from
registers. Tile sizes, warps and stages are autotuned (KERNELS) once per process for each key of
the autotuner (the lengths, the head's column blocks, causal): a new one compiles every config,
side by side (triton_launcher.compile_configs), and times each; a new batch or head count reuses the
pick.
"""

import math
import os

import torch
import triton
import triton.language as tl
import triton.testing

from lmperf.kernels import flash_attention_gluon, flash_attention_gluon_backward
from lmperf.kernels.flash_attention_pytorch import check_inputs
from lmperf.kernels.triton_launcher import Launcher

LOG2E = 1.4426950408889634
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Triton 3.6's CPU interpreter computes tl.dot on bf16 operands wrongly; there (tests only) the
# operands of every product are upcast to fp32. Loads, casts, roundings and stores stay bf16.
_UPCAST_DOT = tl.constexpr(INTERPRET)


def _configs(tile_pairs, warps, stages):
    if INTERPRET:  # the CPU interpreter: one small tile, so tests exercise many tiles and edges
        return [triton.Config({"BLOCK_Q": 16, "BLOCK_K": 16}, num_warps=1, num_stages=1)]
    return [
        triton.Config({"BLOCK_Q": bq, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bq, bk in tile_pairs
        for w in warps
        for s in stages
    ]


def _tune_bench(kernel_call, quantiles):
    """Autotuning's timer: 10 ms warm-up, 40 ms timed per config (Triton's default is 25/100).

    A shape is tuned once per process; with several configs for each of 3 kernels the default made
    tuning, not measurement, the cost of a sweep. 40 ms is still >= 10 runs of the slowest
    leaderboard kernel.
    """
    return triton.testing.do_bench(kernel_call, warmup=10, rep=40, quantiles=quantiles)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    if _UPCAST_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


def head_blocks(d: int) -> tuple[int, int]:
    """(D0, D1): the widths of the power-of-two column blocks that hold a head of size d; D1 = 0 is one
    block.

    tl.dot takes power-of-two tiles. The 2.7B model's d = 80 in one block of 128 spent 60% more
    tensor-core work on zeros; as 64 + 16 it spends none. A remainder that needs a block as wide
    as the first (d = 112: 64 + 64) is one block of twice the width instead.
    """
    d0 = max(16, 1 << (d.bit_length() - 1))
    if d <= d0:
        return d0, 0
    d1 = max(16, triton.next_power_of_2(d - d0))
    return (2 * d0, 0) if d1 == d0 else (d0, d1)


@triton.jit
def _load_cols(
    base,
    rows,
    C0: tl.constexpr,
    WIDTH: tl.constexpr,
    stride_n,
    stride_d,
    n_rows,
    D: tl.constexpr,
    IN_BOUNDS: tl.constexpr,
):
    """Columns [C0, C0 + WIDTH) of some rows; rows past n_rows and columns past D read as zeros.

    IN_BOUNDS: the caller knows every row is < n_rows, so only columns past D are masked.
    """
    cols = C0 + tl.arange(0, WIDTH)
    ptrs = base + rows[:, None] * stride_n + cols[None, :] * stride_d
    if IN_BOUNDS:
        if C0 + WIDTH <= D:
            return tl.load(ptrs)
        else:
            return tl.load(ptrs, mask=cols[None, :] < D, other=0.0)
    else:
        return tl.load(ptrs, mask=(rows[:, None] < n_rows) & (cols[None, :] < D), other=0.0)


@triton.jit
def _load_head(
    base, rows, stride_n, stride_d, n_rows, D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, IN_BOUNDS: tl.constexpr
):
    """Rows of an (n, D) matrix as a tuple of column blocks: (rows x D0,) or (rows x D0, rows x D1)."""
    lo = _load_cols(base, rows, 0, D0, stride_n, stride_d, n_rows, D, IN_BOUNDS)
    if D1 == 0:
        return (lo,)
    else:
        return (lo, _load_cols(base, rows, D0, D1, stride_n, stride_d, n_rows, D, IN_BOUNDS))


@triton.jit
def _store_cols(base, value, rows, C0: tl.constexpr, stride_n, stride_d, n_rows, D: tl.constexpr):
    cols = C0 + tl.arange(0, value.shape[1])
    mask = (rows[:, None] < n_rows) & (cols[None, :] < D)
    tl.store(base + rows[:, None] * stride_n + cols[None, :] * stride_d, value.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _store_head(base, blocks, rows, stride_n, stride_d, n_rows, D: tl.constexpr):
    _store_cols(base, blocks[0], rows, 0, stride_n, stride_d, n_rows, D)
    if len(blocks) == 2:
        _store_cols(base, blocks[1], rows, blocks[0].shape[1], stride_n, stride_d, n_rows, D)


@triton.jit
def _zeros_head(ROWS: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr):
    if D1 == 0:
        return (tl.zeros([ROWS, D0], dtype=tl.float32),)
    else:
        return (tl.zeros([ROWS, D0], dtype=tl.float32), tl.zeros([ROWS, D1], dtype=tl.float32))


@triton.jit
def _scale_head(blocks, factor):
    if len(blocks) == 2:
        return (blocks[0] * factor, blocks[1] * factor)
    else:
        return (blocks[0] * factor,)


@triton.jit
def _dot_head(a, b, PRECISION: tl.constexpr):
    """sum_i a[i] @ b[i]^T: a product that contracts the head (S = Q K^T, dP = dO V^T)."""
    s = _dot(a[0], tl.trans(b[0]), PRECISION)
    if len(a) == 2:
        s += _dot(a[1], tl.trans(b[1]), PRECISION)
    return s


@triton.jit
def _acc_head(acc, x, b, PRECISION: tl.constexpr):
    """acc[i] + x @ b[i]: a product whose output spans the head (O += P V, dK += dS^T Q)."""
    if len(acc) == 2:
        return (acc[0] + _dot(x, b[0], PRECISION), acc[1] + _dot(x, b[1], PRECISION))
    else:
        return (acc[0] + _dot(x, b[0], PRECISION),)


@triton.jit
def _head(X, bh, H, stride_b, stride_h):
    """X's (n, d) matrix of the program: grid axis 1 runs over batch x heads, bh = batch * H + head."""
    return X + (bh // H) * stride_b + (bh % H) * stride_h


@triton.jit
def _heaviest_first(program, n, BLOCK: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """The tile a program takes: under a causal mask the last query tiles have the most keys to
    visit, so they are handed out first and the light ones fill the tail of the launch."""
    if IS_CAUSAL:
        return tl.cdiv(n, BLOCK) - 1 - program
    return program


@triton.jit
def _fwd_inner(
    acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q, k_lo, k_hi, N_K, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, BLOCK_K: tl.constexpr,
    ON_DIAGONAL: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Fold key tiles [k_lo, k_hi) into the running output, row sum and row max (acc, l, m)."""
    offs_k = tl.arange(0, BLOCK_K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        keys = k0 + offs_k
        k = _load_head(K_ptr, keys, stride_kn, stride_kd, N_K, D, D0, D1, EVEN_K)
        v = _load_head(V_ptr, keys, stride_vn, stride_vd, N_K, D, D0, D1, EVEN_K)
        s = _dot_head(q, k, PRECISION)
        if ON_DIAGONAL:
            s = tl.where(offs_q[:, None] >= keys[None, :], s, float("-inf"))
        if not EVEN_K:
            s = tl.where(keys[None, :] < N_K, s, float("-inf"))
        # scaled per row after the max, and per element inside one FFMA with the subtraction: one
        # instruction per score fewer than scaling S first (the scale is positive, so max commutes)
        m_new = tl.maximum(m, tl.max(s, 1) * scale_log2)
        p = tl.math.exp2(s * scale_log2 - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        acc = _acc_head(_scale_head(acc, alpha[:, None]), p.to(v[0].dtype), v, PRECISION)
        m = m_new
    return acc, l, m


@triton.jit
def _fwd_kernel(
    Q, K, V, O, L,
    stride_qb, stride_qh, stride_qn, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_on, stride_od, stride_lb, stride_ln,
    N_Q, N_K, H, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_Q: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    """One program per (query tile, batch x head): O and the logsumexp L of its rows."""
    scale_log2 = tl.cast(scale_log2, tl.float32)  # under torch.compile a Python float arrives as fp64
    q_start = _heaviest_first(tl.program_id(0), N_Q, BLOCK_Q, IS_CAUSAL) * BLOCK_Q
    bh = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    q = _load_head(_head(Q, bh, H, stride_qb, stride_qh), offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
    K_ptr, V_ptr = _head(K, bh, H, stride_kb, stride_kh), _head(V, bh, H, stride_vb, stride_vh)

    m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = _zeros_head(BLOCK_Q, D0, D1)
    if IS_CAUSAL:
        # keys below this tile's first query: every query sees them, no mask
        acc, l, m = _fwd_inner(
            acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
            0, q_start, N_K, scale_log2, D, D0, D1, BLOCK_K, ON_DIAGONAL=False, EVEN_K=True, PRECISION=PRECISION,
        )  # fmt: skip
        # keys on the diagonal block (BLOCK_Q is a multiple of BLOCK_K): masked; keys beyond it are
        # never loaded (n_q == n_k when causal, so a key tile past N_K can only be the masked edge
        # of the last block)
        acc, l, m = _fwd_inner(
            acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
            q_start, tl.minimum(q_start + BLOCK_Q, N_K), N_K, scale_log2, D, D0, D1, BLOCK_K,
            ON_DIAGONAL=True, EVEN_K=EVEN_K, PRECISION=PRECISION,
        )  # fmt: skip
    else:
        acc, l, m = _fwd_inner(
            acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
            0, N_K, N_K, scale_log2, D, D0, D1, BLOCK_K, ON_DIAGONAL=False, EVEN_K=EVEN_K, PRECISION=PRECISION,
        )  # fmt: skip

    _store_head(
        _head(O, bh, H, stride_ob, stride_oh), _scale_head(acc, 1.0 / l[:, None]), offs_q, stride_on, stride_od, N_Q, D
    )
    lse = (m + tl.math.log2(l)) / 1.4426950408889634  # back to natural log
    tl.store(L + bh * stride_lb + offs_q * stride_ln, lse, mask=offs_q < N_Q)


@triton.jit
def _row_delta(o, do):
    """Delta_i = sum_d O_id dO_id, the row term of dS = P * (dP - Delta)."""
    delta = tl.sum(o[0].to(tl.float32) * do[0].to(tl.float32), 1)
    if len(o) == 2:
        delta += tl.sum(o[1].to(tl.float32) * do[1].to(tl.float32), 1)
    return delta


@triton.jit
def _row_lse2(L, bh, rows, stride_lb, stride_ln, N_Q):
    """log2-domain logsumexp of some query rows. Past N_Q it reads as +inf, so P = exp2(S - inf) =
    0 there: no bounds mask needed."""
    return tl.load(L + bh * stride_lb + rows * stride_ln, mask=rows < N_Q, other=float("inf")) * 1.4426950408889634


@triton.jit
def _dkdv_inner(
    dk, dv, k, v, Q, dO, L, Delta, bh, offs_k, stride_qn, stride_qd, stride_don, stride_dod, stride_lb, stride_ln,
    q_lo, q_hi, N_Q, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, BLOCK_Q: tl.constexpr,
    ON_DIAGONAL: tl.constexpr, EVEN_Q: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Accumulate dV += P^T dO and dK += dS^T Q over query tiles [q_lo, q_hi).

    Everything is computed transposed (keys along rows): P^T and dS^T come out of their products
    in registers and feed the next product as its left operand, with no round trip through
    shared memory that transposing P would cost.
    """
    for q0 in range(q_lo, q_hi, BLOCK_Q):
        offs_q = q0 + tl.arange(0, BLOCK_Q)
        q = _load_head(Q, offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
        do = _load_head(dO, offs_q, stride_don, stride_dod, N_Q, D, D0, D1, EVEN_Q)
        lse2 = _row_lse2(L, bh, offs_q, stride_lb, stride_ln, N_Q)
        delta = tl.load(Delta + bh * N_Q + offs_q, mask=offs_q < N_Q, other=0.0)  # stored by the dQ pass
        p_t = tl.math.exp2(_dot_head(k, q, PRECISION) * scale_log2 - lse2[None, :])
        if ON_DIAGONAL:
            p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
        dv = _acc_head(dv, p_t.to(do[0].dtype), do, PRECISION)
        ds_t = p_t * (_dot_head(v, do, PRECISION) - delta[None, :])
        dk = _acc_head(dk, ds_t.to(q[0].dtype), q, PRECISION)
    return dk, dv


@triton.jit
def _bwd_dkdv_kernel(
    Q, K, V, dO, L, Delta, dK, dV,
    stride_qb, stride_qh, stride_qn, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd, stride_dob, stride_doh, stride_don, stride_dod, stride_lb, stride_ln,
    N_Q, N_K, H, scale, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_Q: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    """One program per (key tile, batch x head): dV = sum_q P^T dO, dK = scale * sum_q dS^T Q.

    Keys past N_K load as zeros; their rows of dK and dV are never stored.
    """
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    k_start = tl.program_id(0) * BLOCK_K  # the first key tiles, with the most queries to visit, start first
    bh = tl.program_id(1).to(tl.int64)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    Q, dO = _head(Q, bh, H, stride_qb, stride_qh), _head(dO, bh, H, stride_dob, stride_doh)
    k = _load_head(_head(K, bh, H, stride_kb, stride_kh), offs_k, stride_kn, stride_kd, N_K, D, D0, D1, EVEN_K)
    v = _load_head(_head(V, bh, H, stride_vb, stride_vh), offs_k, stride_vn, stride_vd, N_K, D, D0, D1, EVEN_K)
    dk = _zeros_head(BLOCK_K, D0, D1)
    dv = _zeros_head(BLOCK_K, D0, D1)
    if IS_CAUSAL:
        # queries on this key tile's diagonal see part of it (masked; BLOCK_K is a multiple of
        # BLOCK_Q); later queries see all of it; earlier ones none
        dk, dv = _dkdv_inner(
            dk, dv, k, v, Q, dO, L, Delta, bh, offs_k,
            stride_qn, stride_qd, stride_don, stride_dod, stride_lb, stride_ln,
            k_start, tl.minimum(k_start + BLOCK_K, N_Q), N_Q, scale_log2, D, D0, D1, BLOCK_Q,
            ON_DIAGONAL=True, EVEN_Q=EVEN_Q, PRECISION=PRECISION,
        )  # fmt: skip
        dk, dv = _dkdv_inner(
            dk, dv, k, v, Q, dO, L, Delta, bh, offs_k,
            stride_qn, stride_qd, stride_don, stride_dod, stride_lb, stride_ln,
            k_start + BLOCK_K, N_Q, N_Q, scale_log2, D, D0, D1, BLOCK_Q,
            ON_DIAGONAL=False, EVEN_Q=EVEN_Q, PRECISION=PRECISION,
        )  # fmt: skip
    else:
        dk, dv = _dkdv_inner(
            dk, dv, k, v, Q, dO, L, Delta, bh, offs_k,
            stride_qn, stride_qd, stride_don, stride_dod, stride_lb, stride_ln,
            0, N_Q, N_Q, scale_log2, D, D0, D1, BLOCK_Q, ON_DIAGONAL=False, EVEN_Q=EVEN_Q, PRECISION=PRECISION,
        )  # fmt: skip
    _store_head(_head(dK, bh, H, stride_kb, stride_kh), _scale_head(dk, scale), offs_k, stride_kn, stride_kd, N_K, D)
    _store_head(_head(dV, bh, H, stride_vb, stride_vh), dv, offs_k, stride_vn, stride_vd, N_K, D)


@triton.jit
def _dq_inner(
    dq, q, do, lse2, delta, K, V, offs_q, stride_kn, stride_kd, stride_vn, stride_vd, k_lo, k_hi, N_K, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, BLOCK_K: tl.constexpr,
    ON_DIAGONAL: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Accumulate dQ += dS K over key tiles [k_lo, k_hi).

    Keys past N_K load as zeros, so their dS meets a zero row of K; P is still masked there, since
    exp2(0 - lse) can overflow where every score of a row is very negative.
    """
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k = _load_head(K, offs_k, stride_kn, stride_kd, N_K, D, D0, D1, EVEN_K)
        v = _load_head(V, offs_k, stride_vn, stride_vd, N_K, D, D0, D1, EVEN_K)
        p = tl.math.exp2(_dot_head(q, k, PRECISION) * scale_log2 - lse2[:, None])
        if ON_DIAGONAL:
            p = tl.where(offs_q[:, None] >= offs_k[None, :], p, 0.0)
        if not EVEN_K:
            p = tl.where(offs_k[None, :] < N_K, p, 0.0)
        ds = p * (_dot_head(do, v, PRECISION) - delta[:, None])
        dq = _acc_head(dq, ds.to(k[0].dtype), k, PRECISION)
    return dq


@triton.jit
def _bwd_dq_kernel(
    Q, K, V, O, dO, L, Delta, dQ,
    stride_qb, stride_qh, stride_qn, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_on, stride_od,
    stride_dob, stride_doh, stride_don, stride_dod, stride_lb, stride_ln,
    N_Q, N_K, H, scale, scale_log2,
    D: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_Q: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    """One program per (query tile, batch x head): dQ = scale * sum_k dS K.

    It runs before the dK/dV pass and stores each row's Delta for it: the dO tile is loaded here
    anyway, so Delta costs a read of O's tile rather than a kernel that reads O and dO again.
    """
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    q_start = _heaviest_first(tl.program_id(0), N_Q, BLOCK_Q, IS_CAUSAL) * BLOCK_Q
    bh = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    K, V = _head(K, bh, H, stride_kb, stride_kh), _head(V, bh, H, stride_vb, stride_vh)
    q = _load_head(_head(Q, bh, H, stride_qb, stride_qh), offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
    do = _load_head(_head(dO, bh, H, stride_dob, stride_doh), offs_q, stride_don, stride_dod, N_Q, D, D0, D1, EVEN_Q)
    o = _load_head(_head(O, bh, H, stride_ob, stride_oh), offs_q, stride_on, stride_od, N_Q, D, D0, D1, EVEN_Q)
    delta = _row_delta(o, do)
    tl.store(Delta + bh * N_Q + offs_q, delta, mask=offs_q < N_Q)
    lse2 = _row_lse2(L, bh, offs_q, stride_lb, stride_ln, N_Q)
    dq = _zeros_head(BLOCK_Q, D0, D1)
    if IS_CAUSAL:
        # keys below the tile's first query: no mask; keys on its diagonal (BLOCK_Q is a multiple of
        # BLOCK_K): masked; later keys are invisible
        dq = _dq_inner(
            dq, q, do, lse2, delta, K, V, offs_q, stride_kn, stride_kd, stride_vn, stride_vd,
            0, q_start, N_K, scale_log2, D, D0, D1, BLOCK_K, ON_DIAGONAL=False, EVEN_K=True, PRECISION=PRECISION,
        )  # fmt: skip
        dq = _dq_inner(
            dq, q, do, lse2, delta, K, V, offs_q, stride_kn, stride_kd, stride_vn, stride_vd,
            q_start, tl.minimum(q_start + BLOCK_Q, N_K), N_K, scale_log2, D, D0, D1, BLOCK_K,
            ON_DIAGONAL=True, EVEN_K=EVEN_K, PRECISION=PRECISION,
        )  # fmt: skip
    else:
        dq = _dq_inner(
            dq, q, do, lse2, delta, K, V, offs_q, stride_kn, stride_kd, stride_vn, stride_vd,
            0, N_K, N_K, scale_log2, D, D0, D1, BLOCK_K, ON_DIAGONAL=False, EVEN_K=EVEN_K, PRECISION=PRECISION,
        )  # fmt: skip
    _store_head(_head(dQ, bh, H, stride_qb, stride_qh), _scale_head(dq, scale), offs_q, stride_qn, stride_qd, N_Q, D)


def _tuned(kernel, configs):
    even = triton.heuristics(
        {"EVEN_Q": lambda a: a["N_Q"] % a["BLOCK_Q"] == 0, "EVEN_K": lambda a: a["N_K"] % a["BLOCK_K"] == 0}
    )
    return triton.autotune(configs=configs, key=["N_Q", "N_K", "D0", "D1", "IS_CAUSAL"], do_bench=_tune_bench)(
        even(kernel)
    )


# (forward, dK/dV, dQ) kernels per input dtype, each autotuned over its own tiles. The forward and
# dQ tiles are (query tile, inner key tile), dK/dV's (inner query tile, key tile); the inner tile
# divides the outer one, which the causal diagonal split relies on. bf16 products run on tensor
# cores; fp32 ones in full IEEE precision on CUDA cores, where large tiles spill registers and take
# minutes to compile, so fp32 is tuned over small tiles only; in the H100 sweep that left our fp32
# backward slower than naive attention on cuBLAS's SGEMM from d = 64 at long sequences. A wider
# search at d = 128 (bf16, seq 65536: 12 / 16 / 16 configurations) found no kernel more than 1% faster.
# dK/dV's 8 warps: at d = 80 (64 + 16) its 32 x 128 tile spills 4 warps' registers but not 8's.
# dK/dV's 32 x 64 and dQ's 64 x 32 tiles: the autotuner's picks at the model's contexts (512, 1024)
# from a wider search, 1-2% off fwd+bwd there (notes/flash-hopper.md, variant 13).
KERNELS = {  # tiles and settings: the best few of a wider search at the leaderboard shape on an H100
    torch.bfloat16: (
        _tuned(_fwd_kernel, _configs([(64, 64), (128, 64)], warps=[4, 8], stages=[3])),
        _tuned(_bwd_dkdv_kernel, _configs([(32, 128), (64, 64), (32, 64)], warps=[4, 8], stages=[2, 3, 4])),
        _tuned(_bwd_dq_kernel, _configs([(64, 64), (128, 64), (64, 32)], warps=[4, 8], stages=[3])),
    ),
    torch.float32: (
        _tuned(_fwd_kernel, _configs([(32, 32), (64, 32)], warps=[4, 8], stages=[2])),
        _tuned(_bwd_dkdv_kernel, _configs([(32, 32), (32, 64)], warps=[4, 8], stages=[2])),
        _tuned(_bwd_dq_kernel, _configs([(32, 32), (64, 32)], warps=[4, 8], stages=[2])),
    ),
}


def _precision(dtype: torch.dtype) -> str:
    """Full IEEE fp32 products for fp32 inputs (torch's default matmul precision); bf16 uses tensor cores."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _dense(x: torch.Tensor) -> bool:
    """x fills its storage without gaps, so empty_like(x) shares its strides: the gradients, laid
    out like their inputs, can be indexed with the inputs' strides. Strides alone tell: sorted, each
    is the product of the sizes below it (plain Python, which torch.compile traces without a graph
    break; a meta tensor cost ~20 us per call)."""
    sizes = [size for size in x.shape if size > 1]
    size_of = {stride: size for size, stride in zip(x.shape, x.stride()) if size > 1}
    if len(size_of) < len(sizes):  # two axes with one stride overlap
        return False
    expected = 1
    for stride in sorted(size_of):
        if stride != expected:
            return False
        expected *= size_of[stride]
    return True


def _with_heads(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The tensors as (batch, heads, n, d), as the Gluon kernels take them: (batch, n, d) as one head."""
    return [x if x.dim() == 4 else x.unsqueeze(1) for x in tensors]


def _dims(Q: torch.Tensor, K: torch.Tensor) -> tuple[int, int, int, int, int]:
    """(batch x heads, heads, n_queries, n_keys, d) of (batch, n, d) or (batch, heads, n, d) inputs."""
    *lead, n_q, d = Q.shape
    return math.prod(lead), (Q.shape[1] if Q.dim() == 4 else 1), n_q, K.shape[-2], d


def _strides(x: torch.Tensor) -> tuple[int, int, int, int]:
    """(batch, head, row, column) strides of a (batch, n, d) or (batch, heads, n, d) tensor."""
    return x.stride() if x.dim() == 4 else (x.stride(0), 0, x.stride(1), x.stride(2))


def _signature(x: torch.Tensor) -> tuple:
    """What the launches for x depend on besides its storage: shape, strides, dtype, device, and
    whether its base is 16-byte aligned (Triton specializes a pointer on it; TMA needs it)."""
    return x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0


def _copies(tensors, aligned: bool) -> tuple | None:
    """Per tensor, the copy it needs before the kernels read it (None: none), or None if none does.
    A tensor with gaps in its storage is made contiguous, so that its gradient, laid out alike, is
    indexed with its strides; where the kernels read by TMA (``aligned``), one whose base is not
    16-byte aligned is cloned into fresh storage (contiguous() would return such a view as it is)."""
    copies = tuple(
        torch.Tensor.contiguous if not _dense(x) else torch.Tensor.clone if aligned and x.data_ptr() % 16 else None
        for x in tensors
    )
    return copies if any(copies) else None


def _copied(tensors, copies) -> list[torch.Tensor]:
    return [x if copy is None else copy(x) for x, copy in zip(tensors, copies)]


def _outputs(Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward's outputs for dense Q: O, laid out as Q for (batch, n, d) inputs and as (batch, n,
    heads x d), the heads merged, for (batch, heads, n, d) ones (FlashAttentionTriton says why); and
    the float32 logsumexp L, Q's shape without d."""
    if Q.dim() == 4:
        batch, heads, n, d = Q.shape
        out = Q.new_empty(batch, n, heads * d)
    else:
        out = torch.empty_like(Q)
    return out, Q.new_empty(Q.shape[:-1], dtype=torch.float32)


def _heads_view(out: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """O as (batch, heads, n, d): a view of the merged output for inputs with heads, else out itself."""
    if Q.dim() == 4:
        batch, heads, n, d = Q.shape
        return out.view(batch, n, heads, d).transpose(1, 2)
    return out


def check(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool) -> None:
    """Raise ValueError for inputs the kernels do not take."""
    check_inputs(Q, K, V, is_causal, heads=True)
    if Q.shape[-1] > 128:
        raise ValueError(f"head size {Q.shape[-1]} > 128 is not supported")
    if Q.dtype not in KERNELS:
        raise ValueError(f"dtype {Q.dtype} is not supported: bf16 or fp32")


def capability_of(x: torch.Tensor) -> tuple[int, int] | None:
    """The compute capability of the GPU that x is on; None on a CPU and under Triton's interpreter,
    where only the portable kernels run."""
    return None if INTERPRET or x.device.type != "cuda" else torch.cuda.get_device_capability(x.device)


def forward_kernel(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, capability: tuple[int, int] | None) -> str:
    """The kernel the forward runs for these inputs on a GPU of this compute capability (None: no GPU,
    or the interpreter): 'gluon' where ``flash_attention_gluon.unsupported`` allows, else 'triton'."""
    if capability is None or flash_attention_gluon.unsupported(*_with_heads(Q, K, V), capability):
        return "triton"
    return "gluon"


def backward_kernel(Q, K, V, dO, capability: tuple[int, int] | None) -> str:
    """The kernel the backward runs for these inputs (dO as the kernels read it) on a GPU of this
    compute capability: 'gluon' where ``flash_attention_gluon_backward.unsupported`` allows (which
    also reads torch's deterministic-algorithms flag), else 'triton'."""
    if capability is None or flash_attention_gluon_backward.unsupported(*_with_heads(Q, K, V, dO), capability):
        return "triton"
    return "gluon"


# The plan each pass ran at its last call (its ``kernel``: 'gluon' or 'triton'), for the rows that
# name what ran: a study clears it before a measurement and reads ``ran()`` and ``tiles()`` after
# (through lmperf.attention).
RAN: dict = {}


def ran() -> str:
    """The kernels the passes ran since RAN was cleared, as a row names them: 'triton' or 'gluon' where
    every pass that ran used it, else per pass ('gluon forward, triton backward'); '' if none ran."""
    kernels = {p: RAN[p].kernel for p in ("forward", "backward") if p in RAN}
    if len(set(kernels.values())) <= 1:
        return next(iter(kernels.values()), "")
    return ", ".join(f"{kernel} {p}" for p, kernel in kernels.items())


def tiles() -> str:
    """The tiles (query x key), warps and stages the autotuner picked for the portable kernels that the
    passes ran at their last call since RAN was cleared, as a row names them ('forward 64x64 4w 3s, dq
    64x32 4w 3s, dkdv 32x64 4w 3s'); a pass on Hopper's Gluon kernels (fixed tiles) names none. Picks
    can differ from one process to the next where configs time alike."""
    launchers = []
    if getattr(RAN.get("forward"), "kernel", "") == "triton":
        launchers.append(("forward", RAN["forward"].portable[0]))
    if getattr(RAN.get("backward"), "kernel", "") == "triton":
        launchers += [("dq", RAN["backward"].dq), ("dkdv", RAN["backward"].dkdv)]
    return ", ".join(
        f"{name} {c.kwargs['BLOCK_Q']}x{c.kwargs['BLOCK_K']} {c.num_warps}w {c.num_stages}s"
        for name, launch in launchers
        if (c := launch.config) is not None
    )


# Plans, one per signature of a pass's inputs (_signature, and the flags): what the first call with
# that signature decided (copies, kernels, tiles, launch arguments), so that later calls only allocate
# the outputs and launch. A plan holds no tensors. Plans read the rules they decide by when they are
# made: torch's deterministic-algorithms flag is in the key; a rule changed at run time (tests change
# the Hopper backward's sizes) needs a fresh _PLANS.
_PLANS: dict[tuple, object] = {}


def _planned(kind, key: tuple, *example):
    """The plan of this kind for key, made from the first call's arguments."""
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = kind(*example)
    return plan


class _Forward:
    """The forward for one signature of (Q, K, V, is_causal): Hopper's Gluon kernel where
    ``flash_attention_gluon.unsupported`` allows, the portable kernel elsewhere."""

    def __init__(self, Q, K, V, is_causal: bool):
        check(Q, K, V, is_causal)
        self.kernel = forward_kernel(Q, K, V, capability_of(Q))
        gluon = self.kernel == "gluon"
        self.copies = _copies((Q, K, V), aligned=gluon)
        if self.copies:
            Q, K, V = _copied((Q, K, V), self.copies)
        out, L = _outputs(Q)
        O = _heads_view(out, Q)
        if gluon:  # Hopper: softmax overlapped with the products
            self.launch = flash_attention_gluon.Forward(*_with_heads(Q, K, V, O), is_causal)
            return
        bh, heads, n_q, n_k, d = _dims(Q, K)
        d0, d1 = head_blocks(d)
        scale_log2 = LOG2E / math.sqrt(d)
        kernel = KERNELS[Q.dtype][0]
        grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), bh)  # noqa: E731
        flags = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=is_causal, PRECISION=_precision(Q.dtype))
        strides = (*_strides(Q), *_strides(K), *_strides(V), *_strides(O), *L.stride()[-2:])
        self.portable = Launcher(kernel, grid, interpret=INTERPRET, **flags), (*strides, n_q, n_k, heads, scale_log2)
        self.launch = self._portable

    def _portable(self, Q, K, V, O, L) -> None:
        launch, rest = self.portable
        launch(Q, K, V, O, L, *rest)

    def __call__(self, Q, K, V):
        """(Q, K, V, the output, L): the inputs as the kernels read them (copied where needed), and
        the output as ``_outputs`` lays it out."""
        if self.copies:
            Q, K, V = _copied((Q, K, V), self.copies)
        out, L = _outputs(Q)
        self.launch(Q, K, V, out, L)
        return Q, K, V, out, L


class _Backward:
    """The backward for one signature of (Q, K, V, dO, is_causal, deterministic algorithms): Hopper's
    five-product kernel where ``flash_attention_gluon_backward.unsupported`` allows, the portable kernels
    (a dQ pass that also stores Delta, then a dK/dV pass) elsewhere. O and L are laid out as the
    forward made them."""

    def __init__(self, Q, K, V, O, L, dO, is_causal: bool):
        # o.sum().backward() hands over an expanded dO (all strides 0): loads that cannot be
        # vectorised, re-read in every dK/dV step. One copy costs a read and write of O's size.
        self.contiguous_dO = 0 in dO.stride() or dO.stride(-1) != 1
        if self.contiguous_dO:
            dO = dO.contiguous()
        heads4 = _with_heads(Q, K, V, O, dO)
        self.kernel = backward_kernel(Q, K, V, dO, capability_of(Q))
        gluon = self.kernel == "gluon"
        self.copies = _copies((Q, K, V, dO), aligned=gluon)
        if self.copies:
            Q, K, V, dO = _copied((Q, K, V, dO), self.copies)
            heads4 = _with_heads(Q, K, V, O, dO)
        grads = _with_heads(*(torch.empty_like(x) for x in (Q, K, V)))  # with Q, K, V's strides
        if gluon:  # Hopper: five products
            self.launch = flash_attention_gluon_backward.Backward(*heads4, L, *grads, is_causal)
            return
        bh, heads, n_q, n_k, d = _dims(Q, K)
        d0, d1 = head_blocks(d)
        scale = 1.0 / math.sqrt(d)
        _, dkdv_kernel, dq_kernel = KERNELS[Q.dtype]
        flags = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=is_causal, PRECISION=_precision(Q.dtype), interpret=INTERPRET)
        strides = (*_strides(Q), *_strides(K), *_strides(V))
        rest = (*_strides(dO), *L.stride()[-2:], n_q, n_k, heads, scale, scale * LOG2E)
        self.dq = Launcher(dq_kernel, lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), bh), **flags)
        self.dq_rest = (*strides, *_strides(O), *rest)
        self.dkdv = Launcher(dkdv_kernel, lambda meta: (triton.cdiv(n_k, meta["BLOCK_K"]), bh), **flags)
        self.dkdv_rest = (*strides, *rest)
        self.launch = self._portable

    def _portable(self, Q, K, V, O, dO, L, dQ, dK, dV) -> None:
        delta = torch.empty_like(L)  # written by the dQ pass, read by the dK/dV pass
        self.dq(Q, K, V, O, dO, L, delta, dQ, *self.dq_rest)
        self.dkdv(Q, K, V, dO, L, delta, dK, dV, *self.dkdv_rest)

    def __call__(self, Q, K, V, O, L, dO):
        if self.contiguous_dO:
            dO = dO.contiguous()
        if self.copies:
            Q, K, V, dO = _copied((Q, K, V, dO), self.copies)
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        self.launch(Q, K, V, O, dO, L, dQ, dK, dV)
        return dQ, dK, dV


def _forward(Q, K, V, is_causal: bool):
    """(Q, K, V as read, the output, L) through the plan of this signature."""
    key = (_Forward, _signature(Q), _signature(K), _signature(V), is_causal)
    plan = _planned(_Forward, key, Q, K, V, is_causal)
    RAN["forward"] = plan
    return plan(Q, K, V)


def _backward(Q, K, V, O, L, dO, is_causal: bool):
    """(dQ, dK, dV) through the plan of this signature."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    key = (_Backward, _signature(Q), _signature(K), _signature(V), _signature(dO), is_causal, deterministic)
    plan = _planned(_Backward, key, Q, K, V, O, L, dO, is_causal)
    RAN["backward"] = plan
    return plan(Q, K, V, O, L, dO)


class FlashAttentionTriton(torch.autograd.Function):
    """Q (batch, n_queries, d), K and V (batch, n_keys, d); or all with a heads axis after batch.

    With heads, any strides: the model's (batch, seq, heads, d) projections viewed as (batch,
    heads, seq, d) are read in place, and O is laid out as (batch, seq, heads, d) behind a
    (batch, heads, seq, d) view, so merging the heads back is a view too. No copies either way.

    ``merged_heads``: O is returned as that (batch, seq, heads x d) tensor itself, and its gradient
    comes back in that shape. Under torch.compile this is what spares a copy: the backward is traced
    with a contiguous gradient of the output, and the launches keep the traced strides, so a
    (batch, heads, seq, d) output made inductor copy the output projection's gradient into that
    layout, once for each backward kernel (notes/ladder-power.md). A contiguous (batch, seq,
    heads x d) gradient is what the output projection's backward writes anyway.

    On an sm_90 GPU the passes go to the Gluon kernels where those are faster: the forward to
    flash_attention_gluon, the backward to flash_attention_gluon_backward (whose dQ additions come in
    no fixed order; its ``unsupported`` says where it runs). Elsewhere, and under the interpreter,
    the Triton kernels here. ``forward_kernel`` and ``backward_kernel`` make that choice, and
    ``ran()`` names what the last calls ran, so that a row says which kernels it timed.

    Host time: a launched call at short sequences costs the host more than the GPU. Each pass
    decides everything once per signature of its inputs (a plan: copies, kernels, tiles, launch
    arguments) and later calls only allocate and launch (``Launcher``; notes/flash-launch.md). Where no
    gradient can flow, ``flash_attention`` runs the forward's plan without this Function. Under
    torch.compile each pass is one opaque op, ``lmperf::flash_attention_forward`` and
    ``lmperf::flash_attention_backward``, which runs the same plans.
    """

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False, merged_heads=False):
        if merged_heads and Q.dim() != 4:
            raise ValueError("merged_heads needs (batch, heads, seq, d) inputs")
        if torch.compiler.is_compiling():  # checked and made dense when traced; the launches one op
            check(Q, K, V, is_causal)
            Q, K, V = (x if _dense(x) else x.contiguous() for x in (Q, K, V))
            out, L = torch.ops.lmperf.flash_attention_forward(Q, K, V, is_causal)
        else:
            Q, K, V, out, L = _forward(Q, K, V, is_causal)
        # Saved: out, never its heads view. Where out is returned, a saved view of it would hold out,
        # out its graph node, and the node the view: a cycle that a forward without a backward never
        # frees (each call's outputs leaked, and each call's allocations went to the driver).
        ctx.save_for_backward(L, Q, K, V, out)
        ctx.is_causal, ctx.merged_heads = is_causal, merged_heads
        return out if merged_heads else _heads_view(out, Q)

    @staticmethod
    def backward(ctx, dO):
        L, Q, K, V, out = ctx.saved_tensors
        O = _heads_view(out, Q)
        if ctx.merged_heads:  # (batch, seq, heads x d) -> (batch, heads, seq, d), a view where it can be
            batch, heads, n, d = O.shape
            dO = dO.reshape(batch, n, heads, d).transpose(1, 2)
        if torch.compiler.is_compiling():
            dQ, dK, dV = torch.ops.lmperf.flash_attention_backward(Q, K, V, O, L, dO, ctx.is_causal)
        else:
            dQ, dK, dV = _backward(Q, K, V, O, L, dO, ctx.is_causal)
        return dQ, dK, dV, None, None


def flash_attention(Q, K, V, is_causal: bool = False, merged_heads: bool = False) -> torch.Tensor:
    """``FlashAttentionTriton.apply``, without the autograd.Function where no gradient can flow (under
    no_grad, or no input requires grad): the same plans and kernels, and the same output, without
    the Function's ~10 us of host time a call (notes/flash-launch.md). Under torch.compile, the
    Function, which the compiler traces to the ops below; inside a forward-mode AD level, the
    Function too, which refuses dual tensors (it has no jvp) where this path would drop them."""
    if (
        torch.compiler.is_compiling()
        or torch.autograd.forward_ad._current_level >= 0
        or (torch.is_grad_enabled() and (Q.requires_grad or K.requires_grad or V.requires_grad))
    ):
        return FlashAttentionTriton.apply(Q, K, V, is_causal, merged_heads)
    if merged_heads and Q.dim() != 4:
        raise ValueError("merged_heads needs (batch, heads, seq, d) inputs")
    out = _forward(Q, K, V, is_causal)[3]
    return out if merged_heads else _heads_view(out, Q)


# The ops torch.compile sees, registered with the low-level Library API: the dispatcher calls the
# plans directly (torch.library.custom_op's Python wrapper cost ~80 us of host time per call on an
# H100's host; notes/flash-hopper.md). Both return new tensors; inputs are read only.
_LIBRARY = torch.library.Library("lmperf", "DEF")
_LIBRARY.define("flash_attention_forward(Tensor Q, Tensor K, Tensor V, bool is_causal) -> (Tensor, Tensor)")
_LIBRARY.define(
    "flash_attention_backward(Tensor Q, Tensor K, Tensor V, Tensor O, Tensor L, Tensor dO, bool is_causal)"
    " -> (Tensor, Tensor, Tensor)"
)
for _device in ("CUDA", "CPU"):  # CPU: Triton's interpreter
    _LIBRARY.impl("flash_attention_forward", lambda Q, K, V, is_causal: _forward(Q, K, V, is_causal)[3:], _device)
    _LIBRARY.impl("flash_attention_backward", _backward, _device)
torch.library.register_fake("lmperf::flash_attention_forward", lambda Q, K, V, is_causal: _outputs(Q), lib=_LIBRARY)
torch.library.register_fake(
    "lmperf::flash_attention_backward",
    lambda Q, K, V, O, L, dO, is_causal: (torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)),
    lib=_LIBRARY,
)
