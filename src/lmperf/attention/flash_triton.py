"""FlashAttention-2 in Triton: forward, and a backward without atomics (preprocess D, then a dK/dV
pass over key tiles and a dQ pass over query tiles).

Shapes and saved tensors as in flash_pytorch: Q (batch, n_queries, d); K, V (batch, n_keys, d);
saved exactly L (float32 logsumexp, (batch, n_queries)), Q, K, V, O. Any sequence length (edge
tiles are masked), any head size up to 128, fp32 and bf16. A head is held as one or two
power-of-two column blocks (head_blocks: d = 80 is 64 + 16), so the products do no work on padding.

Layout of the work follows Triton's fused-attention tutorial: one program per (query tile, batch
element); scores in the base-2 domain (exp2, with log2(e) folded into the scale); causal work split
into tiles wholly below the diagonal (no mask) and those on it (masked); tiles wholly above the
diagonal are never visited, and the heaviest query tiles are launched first. The dK/dV pass works
on transposed scores (keys along rows) so that P^T and dS^T feed the next product straight from
registers. Tile sizes, warps and stages are autotuned per shape.
"""

import math
import os

import torch
import triton
import triton.language as tl
import triton.testing

from lmperf.attention.flash_pytorch import check_inputs

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
def _heaviest_first(program, n, BLOCK: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """The tile a program takes: under a causal mask the last query tiles have the most keys to
    visit, so they are handed out first and the light ones fill the tail of the launch."""
    if IS_CAUSAL:
        return tl.cdiv(n, BLOCK) - 1 - program
    return program


@triton.jit
def _fwd_inner(
    acc,
    l,
    m,
    q,
    K_ptr,
    V_ptr,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    offs_q,
    k_lo,
    k_hi,
    N_K,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ON_DIAGONAL: tl.constexpr,
    EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
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
    Q,
    K,
    V,
    O,
    L,
    stride_qb,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_on,
    stride_od,
    stride_lb,
    stride_ln,
    N_Q,
    N_K,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_Q: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    scale_log2 = tl.cast(scale_log2, tl.float32)  # under torch.compile a Python float arrives as fp64
    q_start = _heaviest_first(tl.program_id(0), N_Q, BLOCK_Q, IS_CAUSAL) * BLOCK_Q
    batch = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    q = _load_head(Q + batch * stride_qb, offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
    K_ptr, V_ptr = K + batch * stride_kb, V + batch * stride_vb

    m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = _zeros_head(BLOCK_Q, D0, D1)
    if IS_CAUSAL:
        # keys below this tile's first query: every query sees them, no mask
        acc, l, m = _fwd_inner(
            acc,
            l,
            m,
            q,
            K_ptr,
            V_ptr,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            offs_q,
            0,
            q_start,
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            False,
            True,
            PRECISION,
        )
        # keys on the diagonal block (BLOCK_Q is a multiple of BLOCK_K): masked; keys beyond it are
        # never loaded (n_q == n_k when causal, so a key tile past N_K can only be the masked edge
        # of the last block)
        acc, l, m = _fwd_inner(
            acc,
            l,
            m,
            q,
            K_ptr,
            V_ptr,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            offs_q,
            q_start,
            tl.minimum(q_start + BLOCK_Q, N_K),
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            True,
            EVEN_K,
            PRECISION,
        )
    else:
        acc, l, m = _fwd_inner(
            acc,
            l,
            m,
            q,
            K_ptr,
            V_ptr,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            offs_q,
            0,
            N_K,
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            False,
            EVEN_K,
            PRECISION,
        )

    _store_head(O + batch * stride_ob, _scale_head(acc, 1.0 / l[:, None]), offs_q, stride_on, stride_od, N_Q, D)
    lse = (m + tl.math.log2(l)) / 1.4426950408889634  # back to natural log
    tl.store(L + batch * stride_lb + offs_q * stride_ln, lse, mask=offs_q < N_Q)


@triton.jit
def _bwd_preprocess(
    O,
    dO,
    Delta,
    stride_ob,
    stride_on,
    stride_od,
    stride_dob,
    stride_don,
    stride_dod,
    N_Q,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Delta_i = sum_d O_id dO_id, the row term of dS = P * (dP - Delta)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    batch = tl.program_id(1).to(tl.int64)
    o = _load_head(O + batch * stride_ob, rows, stride_on, stride_od, N_Q, D, D0, D1, False)
    do = _load_head(dO + batch * stride_dob, rows, stride_don, stride_dod, N_Q, D, D0, D1, False)
    delta = tl.sum(o[0].to(tl.float32) * do[0].to(tl.float32), 1)
    if D1 > 0:
        delta += tl.sum(o[1].to(tl.float32) * do[1].to(tl.float32), 1)
    tl.store(Delta + batch * N_Q + rows, delta, mask=rows < N_Q)


@triton.jit
def _row_terms(L, Delta, batch, rows, stride_lb, stride_ln, N_Q):
    """log2-domain logsumexp and Delta of some query rows.

    Past N_Q the logsumexp reads as +inf, so P = exp2(S - inf) = 0 there: no bounds mask needed.
    """
    lse2 = tl.load(L + batch * stride_lb + rows * stride_ln, mask=rows < N_Q, other=float("inf")) * 1.4426950408889634
    delta = tl.load(Delta + batch * N_Q + rows, mask=rows < N_Q, other=0.0)
    return lse2, delta


@triton.jit
def _dkdv_inner(
    dk,
    dv,
    k,
    v,
    Q,
    dO,
    L,
    Delta,
    batch,
    offs_k,
    stride_qn,
    stride_qd,
    stride_don,
    stride_dod,
    stride_lb,
    stride_ln,
    q_lo,
    q_hi,
    N_Q,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    ON_DIAGONAL: tl.constexpr,
    EVEN_Q: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Accumulate dV += P^T dO and dK += dS^T Q over query tiles [q_lo, q_hi).

    Everything is computed transposed (keys along rows): P^T and dS^T come out of their products
    in registers and feed the next product as its left operand, with no round trip through
    shared memory that transposing P would cost.
    """
    for q0 in range(q_lo, q_hi, BLOCK_Q):
        offs_q = q0 + tl.arange(0, BLOCK_Q)
        q = _load_head(Q, offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
        do = _load_head(dO, offs_q, stride_don, stride_dod, N_Q, D, D0, D1, EVEN_Q)
        lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
        p_t = tl.math.exp2(_dot_head(k, q, PRECISION) * scale_log2 - lse2[None, :])
        if ON_DIAGONAL:
            p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
        dv = _acc_head(dv, p_t.to(do[0].dtype), do, PRECISION)
        ds_t = p_t * (_dot_head(v, do, PRECISION) - delta[None, :])
        dk = _acc_head(dk, ds_t.to(q[0].dtype), q, PRECISION)
    return dk, dv


@triton.jit
def _bwd_dkdv_kernel(
    Q,
    K,
    V,
    dO,
    L,
    Delta,
    dK,
    dV,
    stride_qb,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vn,
    stride_vd,
    stride_dob,
    stride_don,
    stride_dod,
    stride_lb,
    stride_ln,
    N_Q,
    N_K,
    scale,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_Q: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """One program per (key tile, batch element): dV = sum_q P^T dO, dK = scale * sum_q dS^T Q.

    Keys past N_K load as zeros; their rows of dK and dV are never stored.
    """
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    k_start = tl.program_id(0) * BLOCK_K  # the first key tiles, with the most queries to visit, start first
    batch = tl.program_id(1).to(tl.int64)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    Q, dO = Q + batch * stride_qb, dO + batch * stride_dob
    k = _load_head(K + batch * stride_kb, offs_k, stride_kn, stride_kd, N_K, D, D0, D1, EVEN_K)
    v = _load_head(V + batch * stride_vb, offs_k, stride_vn, stride_vd, N_K, D, D0, D1, EVEN_K)
    dk = _zeros_head(BLOCK_K, D0, D1)
    dv = _zeros_head(BLOCK_K, D0, D1)
    if IS_CAUSAL:
        # queries on this key tile's diagonal see part of it (masked; BLOCK_K is a multiple of
        # BLOCK_Q); later queries see all of it; earlier ones none
        dk, dv = _dkdv_inner(
            dk,
            dv,
            k,
            v,
            Q,
            dO,
            L,
            Delta,
            batch,
            offs_k,
            stride_qn,
            stride_qd,
            stride_don,
            stride_dod,
            stride_lb,
            stride_ln,
            k_start,
            tl.minimum(k_start + BLOCK_K, N_Q),
            N_Q,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_Q,
            True,
            EVEN_Q,
            PRECISION,
        )
        dk, dv = _dkdv_inner(
            dk,
            dv,
            k,
            v,
            Q,
            dO,
            L,
            Delta,
            batch,
            offs_k,
            stride_qn,
            stride_qd,
            stride_don,
            stride_dod,
            stride_lb,
            stride_ln,
            k_start + BLOCK_K,
            N_Q,
            N_Q,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_Q,
            False,
            EVEN_Q,
            PRECISION,
        )
    else:
        dk, dv = _dkdv_inner(
            dk,
            dv,
            k,
            v,
            Q,
            dO,
            L,
            Delta,
            batch,
            offs_k,
            stride_qn,
            stride_qd,
            stride_don,
            stride_dod,
            stride_lb,
            stride_ln,
            0,
            N_Q,
            N_Q,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_Q,
            False,
            EVEN_Q,
            PRECISION,
        )
    _store_head(dK + batch * stride_kb, _scale_head(dk, scale), offs_k, stride_kn, stride_kd, N_K, D)
    _store_head(dV + batch * stride_vb, dv, offs_k, stride_vn, stride_vd, N_K, D)


@triton.jit
def _dq_inner(
    dq,
    q,
    do,
    lse2,
    delta,
    K,
    V,
    offs_q,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    k_lo,
    k_hi,
    N_K,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ON_DIAGONAL: tl.constexpr,
    EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
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
    Q,
    K,
    V,
    dO,
    L,
    Delta,
    dQ,
    stride_qb,
    stride_qn,
    stride_qd,
    stride_kb,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vn,
    stride_vd,
    stride_dob,
    stride_don,
    stride_dod,
    stride_lb,
    stride_ln,
    N_Q,
    N_K,
    scale,
    scale_log2,
    D: tl.constexpr,
    D0: tl.constexpr,
    D1: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_Q: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """One program per (query tile, batch element): dQ = scale * sum_k dS K."""
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    q_start = _heaviest_first(tl.program_id(0), N_Q, BLOCK_Q, IS_CAUSAL) * BLOCK_Q
    batch = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    K, V = K + batch * stride_kb, V + batch * stride_vb
    q = _load_head(Q + batch * stride_qb, offs_q, stride_qn, stride_qd, N_Q, D, D0, D1, EVEN_Q)
    do = _load_head(dO + batch * stride_dob, offs_q, stride_don, stride_dod, N_Q, D, D0, D1, EVEN_Q)
    lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
    dq = _zeros_head(BLOCK_Q, D0, D1)
    if IS_CAUSAL:
        # keys below the tile's first query: no mask; keys on its diagonal (BLOCK_Q is a multiple of
        # BLOCK_K): masked; later keys are invisible
        dq = _dq_inner(
            dq,
            q,
            do,
            lse2,
            delta,
            K,
            V,
            offs_q,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            0,
            q_start,
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            False,
            True,
            PRECISION,
        )
        dq = _dq_inner(
            dq,
            q,
            do,
            lse2,
            delta,
            K,
            V,
            offs_q,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            q_start,
            tl.minimum(q_start + BLOCK_Q, N_K),
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            True,
            EVEN_K,
            PRECISION,
        )
    else:
        dq = _dq_inner(
            dq,
            q,
            do,
            lse2,
            delta,
            K,
            V,
            offs_q,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            0,
            N_K,
            N_K,
            scale_log2,
            D,
            D0,
            D1,
            BLOCK_K,
            False,
            EVEN_K,
            PRECISION,
        )
    _store_head(dQ + batch * stride_qb, _scale_head(dq, scale), offs_q, stride_qn, stride_qd, N_Q, D)


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
KERNELS = {  # tiles and settings: the best few of a wider search at the leaderboard shape on an H100
    torch.bfloat16: (
        _tuned(_fwd_kernel, _configs([(64, 64), (128, 64)], warps=[4, 8], stages=[3])),
        _tuned(_bwd_dkdv_kernel, _configs([(32, 128), (64, 64)], warps=[4, 8], stages=[2, 3, 4])),
        _tuned(_bwd_dq_kernel, _configs([(64, 64), (128, 64)], warps=[4, 8], stages=[3])),
    ),
    torch.float32: (
        _tuned(_fwd_kernel, _configs([(32, 32), (64, 32)], warps=[4, 8], stages=[2])),
        _tuned(_bwd_dkdv_kernel, _configs([(32, 32), (32, 64)], warps=[4, 8], stages=[2])),
        _tuned(_bwd_dq_kernel, _configs([(32, 32), (64, 32)], warps=[4, 8], stages=[2])),
    ),
}


def _precision(t: torch.Tensor) -> str:
    """Full IEEE fp32 products for fp32 inputs (torch's default matmul precision); bf16 uses tensor cores."""
    return "ieee" if t.dtype == torch.float32 else "tf32"


class FlashAttentionTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        check_inputs(Q, K, V, is_causal)
        batch, n_q, d = Q.shape
        n_k = K.shape[1]
        if d > 128:
            raise ValueError(f"head size {d} > 128 is not supported")
        if Q.dtype not in KERNELS:
            raise ValueError(f"dtype {Q.dtype} is not supported: bf16 or fp32")
        O = torch.empty_like(Q)
        L = torch.empty(batch, n_q, device=Q.device, dtype=torch.float32)
        scale = 1.0 / math.sqrt(d)
        d0, d1 = head_blocks(d)
        grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), batch)  # noqa: E731
        fwd_kernel = KERNELS[Q.dtype][0]
        fwd_kernel[grid](
            Q,
            K,
            V,
            O,
            L,
            *Q.stride(),
            *K.stride(),
            *V.stride(),
            *O.stride(),
            *L.stride(),
            n_q,
            n_k,
            scale * LOG2E,
            D=d,
            D0=d0,
            D1=d1,
            IS_CAUSAL=is_causal,
            PRECISION=_precision(Q),
        )
        ctx.save_for_backward(L, Q, K, V, O)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        L, Q, K, V, O = ctx.saved_tensors
        # o.sum().backward() hands over an expanded dO (all strides 0): loads that cannot be
        # vectorised, re-read in every dK/dV step. One copy costs a read and write of O's size.
        dO = dO.contiguous()
        batch, n_q, d = Q.shape
        n_k = K.shape[1]
        d0, d1 = head_blocks(d)
        scale = 1.0 / math.sqrt(d)
        delta = torch.empty(batch, n_q, device=Q.device, dtype=torch.float32)
        _bwd_preprocess[(triton.cdiv(n_q, 64), batch)](
            O, dO, delta, *O.stride(), *dO.stride(), n_q, D=d, D0=d0, D1=d1, BLOCK=64
        )
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        common = (*Q.stride(), *K.stride(), *V.stride(), *dO.stride(), *L.stride(), n_q, n_k, scale, scale * LOG2E)
        flags = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=ctx.is_causal, PRECISION=_precision(Q))
        _, dkdv_kernel, dq_kernel = KERNELS[Q.dtype]
        dkdv_kernel[lambda meta: (triton.cdiv(n_k, meta["BLOCK_K"]), batch)](
            Q, K, V, dO, L, delta, dK, dV, *common, **flags
        )
        dq_kernel[lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), batch)](Q, K, V, dO, L, delta, dQ, *common, **flags)
        return dQ, dK, dV, None
