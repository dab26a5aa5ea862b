"""Experimental Hopper backward variants: dK/dV and dQ kernels on TMA descriptors, and (hdkdv with
ATOMIC_DQ) a one-kernel backward that accumulates dQ in fp32: 5 products instead of 7. ATOMIC_DQ=1
adds each dQ tile element by element (`tl.atomic_add`, variant 9); ATOMIC_DQ=2 adds the whole tile
with one TMA reduce (`desc.atomic_add`: cp.reduce.async.bulk.tensor, variant 14), the way FA3
accumulates dQ. Causal, bf16, seq a multiple of the tiles. Measured in ../flash-hopper.md; not used
by lmperf.

Ran at: df15c42391aa and 152631d97a59 (H100 80GB HBM3), through bench_bwd.py.
"""

import triton
import triton.language as tl


@triton.jit
def _dkdv_inner(
    dk,
    dv,
    k,
    v,
    desc_q,
    desc_do,
    L,
    Delta,
    DQ,
    batch,
    offs_k,
    q_lo,
    q_hi,
    N,
    scale_log2,
    BLOCK_Q: tl.constexpr,
    D: tl.constexpr,
    MASK: tl.constexpr,
    ATOMIC_DQ: tl.constexpr,
):
    offs_d = tl.arange(0, D)
    for q0 in tl.range(q_lo, q_hi, BLOCK_Q):
        offs_q = q0 + tl.arange(0, BLOCK_Q)
        q = desc_q.load([batch, q0, 0]).reshape(BLOCK_Q, D)
        do = desc_do.load([batch, q0, 0]).reshape(BLOCK_Q, D)
        lse2 = tl.load(L + batch * N + offs_q) * 1.4426950408889634
        delta = tl.load(Delta + batch * N + offs_q)
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * scale_log2 - lse2[None, :])
        if MASK:
            p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        ds_t = (p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])).to(q.dtype)
        dk = tl.dot(ds_t, q, dk)
        if ATOMIC_DQ:  # dQ (unscaled, fp32) from this key tile: 5 products in all instead of 7
            dq = tl.dot(tl.trans(ds_t), k)
            if ATOMIC_DQ == 2:  # DQ is a tensor descriptor: one bulk reduce-add of the tile by the TMA unit
                DQ.atomic_add([batch, q0, 0], dq.reshape(1, BLOCK_Q, D))
            else:
                tl.atomic_add(DQ + (batch * N + offs_q[:, None]).to(tl.int64) * D + offs_d[None, :], dq, sem="relaxed")
    return dk, dv


@triton.jit
def hdkdv(
    Q,
    K,
    V,
    dO,
    L,
    Delta,
    dK,
    dV,
    DQ,
    B,
    N,
    scale,
    scale_log2,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ATOMIC_DQ: tl.constexpr,
):
    """dK and dV per key tile; with ATOMIC_DQ also dQ, accumulated into the fp32 DQ with atomics."""
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    desc_q = tl.make_tensor_descriptor(Q, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    desc_do = tl.make_tensor_descriptor(dO, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    desc_k = tl.make_tensor_descriptor(K, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_v = tl.make_tensor_descriptor(V, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_dk = tl.make_tensor_descriptor(dK, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_dv = tl.make_tensor_descriptor(dV, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    if ATOMIC_DQ == 2:
        DQ = tl.make_tensor_descriptor(DQ, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    k_start = tl.program_id(0) * BLOCK_K
    batch = tl.program_id(1)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    k = desc_k.load([batch, k_start, 0]).reshape(BLOCK_K, D)
    v = desc_v.load([batch, k_start, 0]).reshape(BLOCK_K, D)
    dk = tl.zeros([BLOCK_K, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_K, D], dtype=tl.float32)
    dk, dv = _dkdv_inner(
        dk,
        dv,
        k,
        v,
        desc_q,
        desc_do,
        L,
        Delta,
        DQ,
        batch,
        offs_k,
        k_start,
        k_start + BLOCK_K,
        N,
        scale_log2,
        BLOCK_Q,
        D,
        True,
        ATOMIC_DQ,
    )
    dk, dv = _dkdv_inner(
        dk,
        dv,
        k,
        v,
        desc_q,
        desc_do,
        L,
        Delta,
        DQ,
        batch,
        offs_k,
        k_start + BLOCK_K,
        N,
        N,
        scale_log2,
        BLOCK_Q,
        D,
        False,
        ATOMIC_DQ,
    )
    desc_dk.store([batch, k_start, 0], (dk * scale).to(desc_dk.dtype).reshape(1, BLOCK_K, D))
    desc_dv.store([batch, k_start, 0], dv.to(desc_dv.dtype).reshape(1, BLOCK_K, D))


@triton.jit
def _dq_inner(
    dq,
    q,
    do,
    lse2,
    delta,
    desc_k,
    desc_v,
    batch,
    offs_q,
    k_lo,
    k_hi,
    scale_log2,
    BLOCK_K: tl.constexpr,
    D: tl.constexpr,
    MASK: tl.constexpr,
):
    for k0 in tl.range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k = desc_k.load([batch, k0, 0]).reshape(BLOCK_K, D)
        v = desc_v.load([batch, k0, 0]).reshape(BLOCK_K, D)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * scale_log2 - lse2[:, None])
        if MASK:
            p = tl.where(offs_q[:, None] >= offs_k[None, :], p, 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def hdq(
    Q, K, V, dO, L, Delta, dQ, B, N, scale, scale_log2, D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr
):
    scale, scale_log2 = tl.cast(scale, tl.float32), tl.cast(scale_log2, tl.float32)
    desc_q = tl.make_tensor_descriptor(Q, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    desc_do = tl.make_tensor_descriptor(dO, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    desc_k = tl.make_tensor_descriptor(K, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_v = tl.make_tensor_descriptor(V, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_dq = tl.make_tensor_descriptor(dQ, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    q_start = (tl.cdiv(N, BLOCK_Q) - 1 - tl.program_id(0)) * BLOCK_Q
    batch = tl.program_id(1)
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    q = desc_q.load([batch, q_start, 0]).reshape(BLOCK_Q, D)
    do = desc_do.load([batch, q_start, 0]).reshape(BLOCK_Q, D)
    lse2 = tl.load(L + batch * N + offs_q) * 1.4426950408889634
    delta = tl.load(Delta + batch * N + offs_q)
    dq = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    dq = _dq_inner(dq, q, do, lse2, delta, desc_k, desc_v, batch, offs_q, 0, q_start, scale_log2, BLOCK_K, D, False)
    dq = _dq_inner(
        dq, q, do, lse2, delta, desc_k, desc_v, batch, offs_q, q_start, q_start + BLOCK_Q, scale_log2, BLOCK_K, D, True
    )
    desc_dq.store([batch, q_start, 0], (dq * scale).to(desc_dq.dtype).reshape(1, BLOCK_Q, D))
