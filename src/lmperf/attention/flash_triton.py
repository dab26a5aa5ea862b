"""FlashAttention-2 in Triton: forward, and a backward without atomics (preprocess D, then a dK/dV
pass over key tiles and a dQ pass over query tiles).

Shapes and saved tensors as in flash_pytorch: Q (batch, n_queries, d); K, V (batch, n_keys, d);
saved exactly L (float32 logsumexp, (batch, n_queries)), Q, K, V, O. Any sequence length (edge
tiles are masked), any head size up to 128 (padded to a power of two, masked), fp32 and bf16.

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


@triton.jit
def _load_tile(base, rows, offs_d, stride_n, stride_d, n_rows, D: tl.constexpr, IN_BOUNDS: tl.constexpr):
    """A (rows, D_PAD) tile; rows past n_rows and columns past D read as zeros.

    IN_BOUNDS: the caller knows every row is < n_rows, so only the head-size padding is masked.
    """
    if IN_BOUNDS:
        mask = offs_d[None, :] < D
    else:
        mask = (rows[:, None] < n_rows) & (offs_d[None, :] < D)
    return tl.load(base + rows[:, None] * stride_n + offs_d[None, :] * stride_d, mask=mask, other=0.0)


@triton.jit
def _heaviest_first(program, n, BLOCK: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """The tile a program takes: under a causal mask the last query tiles have the most keys to
    visit, so they are handed out first and the light ones fill the tail of the launch."""
    if IS_CAUSAL:
        return tl.cdiv(n, BLOCK) - 1 - program
    return program


@triton.jit
def _store_tile(base, value, rows, offs_d, stride_n, stride_d, n_rows, D: tl.constexpr):
    mask = (rows[:, None] < n_rows) & (offs_d[None, :] < D)
    tl.store(base + rows[:, None] * stride_n + offs_d[None, :] * stride_d, value.to(base.dtype.element_ty), mask=mask)


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
    offs_d,
    k_lo,
    k_hi,
    N_K,
    scale_log2,
    D: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ON_DIAGONAL: tl.constexpr,
    EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    offs_k = tl.arange(0, BLOCK_K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        keys = k0 + offs_k
        k = _load_tile(K_ptr, keys, offs_d, stride_kn, stride_kd, N_K, D, EVEN_K)
        v = _load_tile(V_ptr, keys, offs_d, stride_vn, stride_vd, N_K, D, EVEN_K)
        s = _dot(q, tl.trans(k), PRECISION)
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
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, PRECISION)
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
    D_PAD: tl.constexpr,
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
    offs_d = tl.arange(0, D_PAD)
    q = _load_tile(Q + batch * stride_qb, offs_q, offs_d, stride_qn, stride_qd, N_Q, D, EVEN_Q)
    K_ptr, V_ptr = K + batch * stride_kb, V + batch * stride_vb

    m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, D_PAD], dtype=tl.float32)
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
            offs_d,
            0,
            q_start,
            N_K,
            scale_log2,
            D,
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
            offs_d,
            q_start,
            tl.minimum(q_start + BLOCK_Q, N_K),
            N_K,
            scale_log2,
            D,
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
            offs_d,
            0,
            N_K,
            N_K,
            scale_log2,
            D,
            BLOCK_K,
            False,
            EVEN_K,
            PRECISION,
        )

    _store_tile(O + batch * stride_ob, acc / l[:, None], offs_q, offs_d, stride_on, stride_od, N_Q, D)
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
    D_PAD: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Delta_i = sum_d O_id dO_id, the row term of dS = P * (dP - Delta)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    batch = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, D_PAD)
    mask = (rows[:, None] < N_Q) & (offs_d[None, :] < D)
    o = tl.load(O + batch * stride_ob + rows[:, None] * stride_on + offs_d[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(
        dO + batch * stride_dob + rows[:, None] * stride_don + offs_d[None, :] * stride_dod, mask=mask, other=0.0
    )
    tl.store(Delta + batch * N_Q + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=rows < N_Q)


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
    offs_d,
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
        q = _load_tile(Q, offs_q, offs_d, stride_qn, stride_qd, N_Q, D, EVEN_Q)
        do = _load_tile(dO, offs_q, offs_d, stride_don, stride_dod, N_Q, D, EVEN_Q)
        lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
        p_t = tl.math.exp2(_dot(k, tl.trans(q), PRECISION) * scale_log2 - lse2[None, :])
        if ON_DIAGONAL:
            p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
        dv += _dot(p_t.to(do.dtype), do, PRECISION)
        ds_t = p_t * (_dot(v, tl.trans(do), PRECISION) - delta[None, :])
        dk += _dot(ds_t.to(q.dtype), q, PRECISION)
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
    D_PAD: tl.constexpr,
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
    offs_d = tl.arange(0, D_PAD)
    Q, dO = Q + batch * stride_qb, dO + batch * stride_dob
    k = _load_tile(K + batch * stride_kb, offs_k, offs_d, stride_kn, stride_kd, N_K, D, EVEN_K)
    v = _load_tile(V + batch * stride_vb, offs_k, offs_d, stride_vn, stride_vd, N_K, D, EVEN_K)
    dk = tl.zeros([BLOCK_K, D_PAD], dtype=tl.float32)
    dv = tl.zeros([BLOCK_K, D_PAD], dtype=tl.float32)
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
            offs_d,
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
            offs_d,
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
            offs_d,
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
            BLOCK_Q,
            False,
            EVEN_Q,
            PRECISION,
        )
    _store_tile(dK + batch * stride_kb, dk * scale, offs_k, offs_d, stride_kn, stride_kd, N_K, D)
    _store_tile(dV + batch * stride_vb, dv, offs_k, offs_d, stride_vn, stride_vd, N_K, D)


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
    offs_d,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    k_lo,
    k_hi,
    N_K,
    scale_log2,
    D: tl.constexpr,
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
        k = _load_tile(K, offs_k, offs_d, stride_kn, stride_kd, N_K, D, EVEN_K)
        v = _load_tile(V, offs_k, offs_d, stride_vn, stride_vd, N_K, D, EVEN_K)
        p = tl.math.exp2(_dot(q, tl.trans(k), PRECISION) * scale_log2 - lse2[:, None])
        if ON_DIAGONAL:
            p = tl.where(offs_q[:, None] >= offs_k[None, :], p, 0.0)
        if not EVEN_K:
            p = tl.where(offs_k[None, :] < N_K, p, 0.0)
        ds = p * (_dot(do, tl.trans(v), PRECISION) - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, PRECISION)
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
    D_PAD: tl.constexpr,
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
    offs_d = tl.arange(0, D_PAD)
    K, V = K + batch * stride_kb, V + batch * stride_vb
    q = _load_tile(Q + batch * stride_qb, offs_q, offs_d, stride_qn, stride_qd, N_Q, D, EVEN_Q)
    do = _load_tile(dO + batch * stride_dob, offs_q, offs_d, stride_don, stride_dod, N_Q, D, EVEN_Q)
    lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
    dq = tl.zeros([BLOCK_Q, D_PAD], dtype=tl.float32)
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
            offs_d,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            0,
            q_start,
            N_K,
            scale_log2,
            D,
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
            offs_d,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            q_start,
            tl.minimum(q_start + BLOCK_Q, N_K),
            N_K,
            scale_log2,
            D,
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
            offs_d,
            stride_kn,
            stride_kd,
            stride_vn,
            stride_vd,
            0,
            N_K,
            N_K,
            scale_log2,
            D,
            BLOCK_K,
            False,
            EVEN_K,
            PRECISION,
        )
    _store_tile(dQ + batch * stride_qb, dq * scale, offs_q, offs_d, stride_qn, stride_qd, N_Q, D)


def _tuned(kernel, configs):
    even = triton.heuristics(
        {"EVEN_Q": lambda a: a["N_Q"] % a["BLOCK_Q"] == 0, "EVEN_K": lambda a: a["N_K"] % a["BLOCK_K"] == 0}
    )
    return triton.autotune(configs=configs, key=["N_Q", "N_K", "D_PAD", "IS_CAUSAL"], do_bench=_tune_bench)(
        even(kernel)
    )


# (forward, dK/dV, dQ) kernels per input dtype, each autotuned over its own tiles. The forward and
# dQ tiles are (query tile, inner key tile), dK/dV's (inner query tile, key tile); the inner tile
# divides the outer one, which the causal diagonal split relies on. bf16 products run on tensor
# cores; fp32 ones in full IEEE precision on CUDA cores, where large tiles spill registers and take
# minutes to compile, so fp32 is tuned over small tiles only; in the H100 sweep that left our fp32
# backward slower than naive attention on cuBLAS's SGEMM from d = 64 at long sequences. A wider
# search at d = 128 (bf16, seq 65536: 12 / 16 / 16 configurations) found no kernel more than 1% faster.
KERNELS = {  # tiles and settings: the best few of a wider search at the leaderboard shape on an H100
    torch.bfloat16: (
        _tuned(_fwd_kernel, _configs([(64, 64), (128, 64)], warps=[4, 8], stages=[3])),
        _tuned(_bwd_dkdv_kernel, _configs([(32, 128), (64, 64)], warps=[4], stages=[2, 3, 4])),
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
            D_PAD=max(16, triton.next_power_of_2(d)),
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
        d_pad = max(16, triton.next_power_of_2(d))
        scale = 1.0 / math.sqrt(d)
        delta = torch.empty(batch, n_q, device=Q.device, dtype=torch.float32)
        _bwd_preprocess[(triton.cdiv(n_q, 64), batch)](
            O, dO, delta, *O.stride(), *dO.stride(), n_q, D=d, D_PAD=d_pad, BLOCK=64
        )
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        common = (*Q.stride(), *K.stride(), *V.stride(), *dO.stride(), *L.stride(), n_q, n_k, scale, scale * LOG2E)
        flags = dict(D=d, D_PAD=d_pad, IS_CAUSAL=ctx.is_causal, PRECISION=_precision(Q))
        _, dkdv_kernel, dq_kernel = KERNELS[Q.dtype]
        dkdv_kernel[lambda meta: (triton.cdiv(n_k, meta["BLOCK_K"]), batch)](
            Q, K, V, dO, L, delta, dK, dV, *common, **flags
        )
        dq_kernel[lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), batch)](Q, K, V, dO, L, delta, dQ, *common, **flags)
        return dQ, dK, dV, None
