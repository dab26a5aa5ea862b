"""FlashAttention-2 in Triton: forward, and a backward without atomics (preprocess D, then a dK/dV
pass over key tiles and a dQ pass over query tiles).

Shapes and saved tensors as in flash_pytorch: Q (batch, n_queries, d); K, V (batch, n_keys, d);
saved exactly L (float32 logsumexp, (batch, n_queries)), Q, K, V, O. Any sequence length (edge
tiles are masked), any head size up to 128 (padded to a power of two, masked), fp32 and bf16.

Layout of the work follows Triton's fused-attention tutorial: one program per (query tile, batch
element); scores in the base-2 domain (exp2, with log2(e) folded into the scale); causal work split
into key tiles wholly below the diagonal (no mask) and those on it (masked); tiles wholly above
the diagonal are never visited. Tile sizes, warps and stages are autotuned per shape.
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
    return [triton.Config({"BLOCK_Q": bq, "BLOCK_K": bk}, num_warps=w, num_stages=s)
            for bq, bk in tile_pairs for w in warps for s in stages]


def _tune_bench(kernel_call, quantiles):
    """Autotuning's timer: 10 ms warm-up, 40 ms timed per config (Triton's default is 25/100).

    A shape is tuned once per process; with 12 configs x 3 kernels the default made tuning, not
    measurement, the cost of a sweep. 40 ms is still >= 10 runs of the slowest leaderboard kernel.
    """
    return triton.testing.do_bench(kernel_call, warmup=10, rep=40, quantiles=quantiles)


FWD_CONFIGS = _configs([(64, 32), (64, 64), (128, 64)], warps=[4, 8], stages=[2, 3])
BWD_CONFIGS = _configs([(32, 64), (64, 64), (64, 128)], warps=[4, 8], stages=[2, 3])  # (inner query, key tile)
DQ_CONFIGS = _configs([(64, 32), (64, 64), (128, 64)], warps=[4, 8], stages=[2, 3])  # (query tile, inner key)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    if _UPCAST_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _load_tile(base, rows, offs_d, stride_n, stride_d, n_rows, D: tl.constexpr):
    """A (rows, D_PAD) tile; rows past n_rows and columns past D read as zeros."""
    mask = (rows[:, None] < n_rows) & (offs_d[None, :] < D)
    return tl.load(base + rows[:, None] * stride_n + offs_d[None, :] * stride_d, mask=mask, other=0.0)


@triton.jit
def _store_tile(base, value, rows, offs_d, stride_n, stride_d, n_rows, D: tl.constexpr):
    mask = (rows[:, None] < n_rows) & (offs_d[None, :] < D)
    tl.store(base + rows[:, None] * stride_n + offs_d[None, :] * stride_d, value.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _fwd_inner(acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q, offs_d,
               k_lo, k_hi, N_K, scale_log2, D: tl.constexpr, BLOCK_K: tl.constexpr,
               ON_DIAGONAL: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr):
    offs_k = tl.arange(0, BLOCK_K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        keys = k0 + offs_k
        k = _load_tile(K_ptr, keys, offs_d, stride_kn, stride_kd, N_K, D)
        v = _load_tile(V_ptr, keys, offs_d, stride_vn, stride_vd, N_K, D)
        s = _dot(q, tl.trans(k), PRECISION) * scale_log2
        if ON_DIAGONAL:
            s = tl.where(offs_q[:, None] >= keys[None, :], s, float("-inf"))
        if not EVEN_K:
            s = tl.where(keys[None, :] < N_K, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, PRECISION)
        m = m_new
    return acc, l, m


@triton.autotune(configs=FWD_CONFIGS, key=["N_Q", "N_K", "D_PAD", "IS_CAUSAL", "PRECISION"], do_bench=_tune_bench)
@triton.heuristics({"EVEN_K": lambda a: a["N_K"] % a["BLOCK_K"] == 0})
@triton.jit
def _fwd_kernel(Q, K, V, O, L,
                stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                stride_vb, stride_vn, stride_vd, stride_ob, stride_on, stride_od, stride_lb, stride_ln,
                N_Q, N_K, scale_log2,
                D: tl.constexpr, D_PAD: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    scale_log2 = tl.cast(scale_log2, tl.float32)  # under torch.compile a Python float arrives as fp64
    q_start = tl.program_id(0) * BLOCK_Q
    batch = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, D_PAD)
    q = _load_tile(Q + batch * stride_qb, offs_q, offs_d, stride_qn, stride_qd, N_Q, D)
    K_ptr, V_ptr = K + batch * stride_kb, V + batch * stride_vb

    m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, D_PAD], dtype=tl.float32)
    if IS_CAUSAL:
        # keys below this tile's first query: every query sees them, no mask
        acc, l, m = _fwd_inner(acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q, offs_d,
                               0, q_start, N_K, scale_log2, D, BLOCK_K, False, True, PRECISION)
        # keys on the diagonal block: masked; keys beyond it are never loaded (n_q == n_k when causal,
        # so a key tile past N_K can only be the masked edge of the last block)
        acc, l, m = _fwd_inner(acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q, offs_d,
                               q_start, q_start + BLOCK_Q, N_K, scale_log2, D, BLOCK_K, True, EVEN_K, PRECISION)
    else:
        acc, l, m = _fwd_inner(acc, l, m, q, K_ptr, V_ptr, stride_kn, stride_kd, stride_vn, stride_vd, offs_q, offs_d,
                               0, N_K, N_K, scale_log2, D, BLOCK_K, False, EVEN_K, PRECISION)

    _store_tile(O + batch * stride_ob, acc / l[:, None], offs_q, offs_d, stride_on, stride_od, N_Q, D)
    lse = (m + tl.math.log2(l)) / 1.4426950408889634  # back to natural log
    tl.store(L + batch * stride_lb + offs_q * stride_ln, lse, mask=offs_q < N_Q)


@triton.jit
def _bwd_preprocess(O, dO, Delta, stride_ob, stride_on, stride_od, stride_dob, stride_don, stride_dod,
                    N_Q, D: tl.constexpr, D_PAD: tl.constexpr, BLOCK: tl.constexpr):
    """Delta_i = sum_d O_id dO_id, the row term of dS = P * (dP - Delta)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    batch = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, D_PAD)
    mask = (rows[:, None] < N_Q) & (offs_d[None, :] < D)
    o = tl.load(O + batch * stride_ob + rows[:, None] * stride_on + offs_d[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(dO + batch * stride_dob + rows[:, None] * stride_don + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
    tl.store(Delta + batch * N_Q + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=rows < N_Q)


@triton.jit
def _row_terms(L, Delta, batch, rows, stride_lb, stride_ln, N_Q):
    """log2-domain logsumexp and Delta of some query rows (zeros past N_Q)."""
    lse2 = tl.load(L + batch * stride_lb + rows * stride_ln, mask=rows < N_Q, other=0.0) * 1.4426950408889634
    delta = tl.load(Delta + batch * N_Q + rows, mask=rows < N_Q, other=0.0)
    return lse2, delta


@triton.jit
def _recompute_p(q, k, lse2, offs_q, offs_k, N_Q, N_K, scale_log2, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """P = exp(S - L) from the saved logsumexp; zero where the key is masked or out of range."""
    s = _dot(q, tl.trans(k), PRECISION) * scale_log2
    visible = (offs_q[:, None] < N_Q) & (offs_k[None, :] < N_K)
    if IS_CAUSAL:
        visible = visible & (offs_q[:, None] >= offs_k[None, :])
    return tl.where(visible, tl.math.exp2(s - lse2[:, None]), 0.0)


@triton.autotune(configs=BWD_CONFIGS, key=["N_Q", "N_K", "D_PAD", "IS_CAUSAL", "PRECISION"], do_bench=_tune_bench)
@triton.jit
def _bwd_dkdv_kernel(Q, K, V, dO, L, Delta, dK, dV,
                     stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                     stride_vb, stride_vn, stride_vd, stride_dob, stride_don, stride_dod,
                     stride_lb, stride_ln, N_Q, N_K, scale, scale_log2,
                     D: tl.constexpr, D_PAD: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                     BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program per (key tile, batch element): dV = sum_q P^T dO, dK = scale * sum_q dS^T Q."""
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    k_start = tl.program_id(0) * BLOCK_K
    batch = tl.program_id(1).to(tl.int64)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, D_PAD)
    Q, dO = Q + batch * stride_qb, dO + batch * stride_dob
    k = _load_tile(K + batch * stride_kb, offs_k, offs_d, stride_kn, stride_kd, N_K, D)
    v = _load_tile(V + batch * stride_vb, offs_k, offs_d, stride_vn, stride_vd, N_K, D)
    dk = tl.zeros([BLOCK_K, D_PAD], dtype=tl.float32)
    dv = tl.zeros([BLOCK_K, D_PAD], dtype=tl.float32)
    q_lo = (k_start // BLOCK_Q) * BLOCK_Q if IS_CAUSAL else 0  # earlier queries cannot see these keys
    for q0 in range(q_lo, N_Q, BLOCK_Q):
        offs_q = q0 + tl.arange(0, BLOCK_Q)
        q = _load_tile(Q, offs_q, offs_d, stride_qn, stride_qd, N_Q, D)
        do = _load_tile(dO, offs_q, offs_d, stride_don, stride_dod, N_Q, D)
        lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
        p = _recompute_p(q, k, lse2, offs_q, offs_k, N_Q, N_K, scale_log2, IS_CAUSAL, PRECISION)
        dv += _dot(tl.trans(p.to(do.dtype)), do, PRECISION)
        ds = p * (_dot(do, tl.trans(v), PRECISION) - delta[:, None])
        dk += _dot(tl.trans(ds.to(q.dtype)), q, PRECISION)
    _store_tile(dK + batch * stride_kb, dk * scale, offs_k, offs_d, stride_kn, stride_kd, N_K, D)
    _store_tile(dV + batch * stride_vb, dv, offs_k, offs_d, stride_vn, stride_vd, N_K, D)


@triton.autotune(configs=DQ_CONFIGS, key=["N_Q", "N_K", "D_PAD", "IS_CAUSAL", "PRECISION"], do_bench=_tune_bench)
@triton.jit
def _bwd_dq_kernel(Q, K, V, dO, L, Delta, dQ,
                   stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                   stride_vb, stride_vn, stride_vd, stride_dob, stride_don, stride_dod,
                   stride_lb, stride_ln, N_Q, N_K, scale, scale_log2,
                   D: tl.constexpr, D_PAD: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                   BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program per (query tile, batch element): dQ = scale * sum_k dS K."""
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    q_start = tl.program_id(0) * BLOCK_Q
    batch = tl.program_id(1).to(tl.int64)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, D_PAD)
    K, V = K + batch * stride_kb, V + batch * stride_vb
    q = _load_tile(Q + batch * stride_qb, offs_q, offs_d, stride_qn, stride_qd, N_Q, D)
    do = _load_tile(dO + batch * stride_dob, offs_q, offs_d, stride_don, stride_dod, N_Q, D)
    lse2, delta = _row_terms(L, Delta, batch, offs_q, stride_lb, stride_ln, N_Q)
    dq = tl.zeros([BLOCK_Q, D_PAD], dtype=tl.float32)
    if IS_CAUSAL:
        k_hi = q_start + BLOCK_Q  # later keys are invisible; keys past N_K are masked
    else:
        k_hi = N_K
    for k0 in range(0, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k = _load_tile(K, offs_k, offs_d, stride_kn, stride_kd, N_K, D)
        v = _load_tile(V, offs_k, offs_d, stride_vn, stride_vd, N_K, D)
        p = _recompute_p(q, k, lse2, offs_q, offs_k, N_Q, N_K, scale_log2, IS_CAUSAL, PRECISION)
        ds = p * (_dot(do, tl.trans(v), PRECISION) - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, PRECISION)
    _store_tile(dQ + batch * stride_qb, dq * scale, offs_q, offs_d, stride_qn, stride_qd, N_Q, D)


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
        O = torch.empty_like(Q)
        L = torch.empty(batch, n_q, device=Q.device, dtype=torch.float32)
        scale = 1.0 / math.sqrt(d)
        grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), batch)  # noqa: E731
        _fwd_kernel[grid](Q, K, V, O, L, *Q.stride(), *K.stride(), *V.stride(), *O.stride(), *L.stride(),
                          n_q, n_k, scale * LOG2E, D=d, D_PAD=max(16, triton.next_power_of_2(d)),
                          IS_CAUSAL=is_causal, PRECISION=_precision(Q))
        ctx.save_for_backward(L, Q, K, V, O)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        L, Q, K, V, O = ctx.saved_tensors
        batch, n_q, d = Q.shape
        n_k = K.shape[1]
        d_pad = max(16, triton.next_power_of_2(d))
        scale = 1.0 / math.sqrt(d)
        delta = torch.empty(batch, n_q, device=Q.device, dtype=torch.float32)
        _bwd_preprocess[(triton.cdiv(n_q, 64), batch)](O, dO, delta, *O.stride(), *dO.stride(), n_q,
                                                      D=d, D_PAD=d_pad, BLOCK=64)
        dQ, dK, dV = torch.empty_like(Q), torch.empty_like(K), torch.empty_like(V)
        common = (*Q.stride(), *K.stride(), *V.stride(), *dO.stride(), *L.stride(), n_q, n_k, scale, scale * LOG2E)
        flags = dict(D=d, D_PAD=d_pad, IS_CAUSAL=ctx.is_causal, PRECISION=_precision(Q))
        _bwd_dkdv_kernel[lambda meta: (triton.cdiv(n_k, meta["BLOCK_K"]), batch)](Q, K, V, dO, L, delta, dK, dV,
                                                                                   *common, **flags)
        _bwd_dq_kernel[lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), batch)](Q, K, V, dO, L, delta, dQ,
                                                                                 *common, **flags)
        return dQ, dK, dV, None
