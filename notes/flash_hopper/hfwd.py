"""Experimental Hopper forward variants (TMA descriptors, FFMA-folded scale, FMA-pipe exp2 on half the
scores, a persistent heaviest-first grid, a hand-rotated S = QK^T). Causal, bf16, seq a multiple of the
tiles. Measured in ../flash-hopper.md; not used by lmperf.

Ran at: df15c42391aa (H100 80GB HBM3), through bench_fwd.py and ab_fwd.py.
"""

import triton
import triton.language as tl


@triton.jit
def _exp2_fma(x):
    """2^x on the FMA pipe (x <= 0): round-to-nearest split n + f, degree-3 minimax on [-1/2, 1/2]."""
    x = tl.maximum(x, -126.0)
    t = x + 12582912.0
    f = x - (t - 12582912.0)
    p = 0.05508868380751114 * f + 0.24260405145947936
    p = p * f + 0.6932762416819607
    p = p * f + 0.9999289403695112
    bits = p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _exp2_split(x, BQ: tl.constexpr, BK: tl.constexpr, POLY: tl.constexpr):
    if POLY:
        a, b = tl.split(x.reshape(BQ, BK // 2, 2))
        return tl.join(tl.math.exp2(a), _exp2_fma(b)).reshape(BQ, BK)
    return tl.math.exp2(x)


@triton.jit
def _softmax_step(acc, l, m, s, v, scale_log2, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, POLY: tl.constexpr):
    m_new = tl.maximum(m, tl.max(s, 1) * scale_log2)
    p = _exp2_split(s * scale_log2 - m_new[:, None], BLOCK_Q, BLOCK_K, POLY)
    alpha = tl.math.exp2(m - m_new)
    l = l * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l, m_new


@triton.jit
def _inner(
    acc,
    l,
    m,
    q,
    desc_k,
    desc_v,
    batch,
    offs_q,
    k_lo,
    k_hi,
    scale_log2,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    D: tl.constexpr,
    ON_DIAGONAL: tl.constexpr,
    POLY: tl.constexpr,
):
    offs_k = tl.arange(0, BLOCK_K)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K):
        k = desc_k.load([batch, k0, 0]).reshape(BLOCK_K, D)
        v = desc_v.load([batch, k0, 0]).reshape(BLOCK_K, D)
        s = tl.dot(q, tl.trans(k))
        if ON_DIAGONAL:  # masked tiles keep MUFU exp2: the FMA-pipe one clamps -inf to 2^-126
            s = tl.where(offs_q[:, None] >= (k0 + offs_k)[None, :], s, float("-inf"))
            acc, l, m = _softmax_step(acc, l, m, s, v, scale_log2, BLOCK_Q, BLOCK_K, False)
        else:
            acc, l, m = _softmax_step(acc, l, m, s, v, scale_log2, BLOCK_Q, BLOCK_K, POLY)
    return acc, l, m


@triton.jit
def _inner_rotated(
    acc,
    l,
    m,
    q,
    desc_k,
    desc_v,
    batch,
    k_lo,
    k_hi,
    scale_log2,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    D: tl.constexpr,
    POLY: tl.constexpr,
):
    """Unmasked key tiles, the next tile's S = Q K^T issued before this tile's softmax, so the
    tensor cores work while the softmax runs (FA3's intra-warpgroup overlap, by hand)."""
    if k_hi > k_lo:
        s = tl.dot(q, tl.trans(desc_k.load([batch, k_lo, 0]).reshape(BLOCK_K, D)))
        for k0 in tl.range(k_lo, k_hi - BLOCK_K, BLOCK_K):
            s_next = tl.dot(q, tl.trans(desc_k.load([batch, k0 + BLOCK_K, 0]).reshape(BLOCK_K, D)))
            v = desc_v.load([batch, k0, 0]).reshape(BLOCK_K, D)
            acc, l, m = _softmax_step(acc, l, m, s, v, scale_log2, BLOCK_Q, BLOCK_K, POLY)
            s = s_next
        v = desc_v.load([batch, k_hi - BLOCK_K, 0]).reshape(BLOCK_K, D)
        acc, l, m = _softmax_step(acc, l, m, s, v, scale_log2, BLOCK_Q, BLOCK_K, POLY)
    return acc, l, m


@triton.jit
def _one_tile(
    q_start,
    batch,
    desc_q,
    desc_k,
    desc_v,
    desc_o,
    L,
    N,
    scale_log2,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    POLY: tl.constexpr,
    ROTATE: tl.constexpr,
):
    offs_q = q_start + tl.arange(0, BLOCK_Q)
    q = desc_q.load([batch, q_start, 0]).reshape(BLOCK_Q, D)
    m = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    if ROTATE:
        acc, l, m = _inner_rotated(
            acc, l, m, q, desc_k, desc_v, batch, 0, q_start, scale_log2, BLOCK_Q, BLOCK_K, D, POLY
        )
    else:
        acc, l, m = _inner(
            acc, l, m, q, desc_k, desc_v, batch, offs_q, 0, q_start, scale_log2, BLOCK_Q, BLOCK_K, D, False, POLY
        )
    acc, l, m = _inner(
        acc,
        l,
        m,
        q,
        desc_k,
        desc_v,
        batch,
        offs_q,
        q_start,
        q_start + BLOCK_Q,
        scale_log2,
        BLOCK_Q,
        BLOCK_K,
        D,
        True,
        POLY,
    )
    desc_o.store([batch, q_start, 0], (acc / l[:, None]).to(desc_o.dtype).reshape(1, BLOCK_Q, D))
    tl.store(L + batch * N + offs_q, (m + tl.math.log2(l)) * 0.6931471805599453, mask=offs_q < N)


@triton.jit
def hfwd(
    Q,
    K,
    V,
    O,
    L,
    B,
    N,
    scale_log2,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    POLY: tl.constexpr,
    PERSISTENT: tl.constexpr,
    ROTATE: tl.constexpr,
):
    scale_log2 = tl.cast(scale_log2, tl.float32)
    desc_q = tl.make_tensor_descriptor(Q, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    desc_k = tl.make_tensor_descriptor(K, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_v = tl.make_tensor_descriptor(V, [B, N, D], [N * D, D, 1], [1, BLOCK_K, D])
    desc_o = tl.make_tensor_descriptor(O, [B, N, D], [N * D, D, 1], [1, BLOCK_Q, D])
    n_q_tiles = tl.cdiv(N, BLOCK_Q)
    if PERSISTENT:
        for tile in tl.range(tl.program_id(0), n_q_tiles * B, tl.num_programs(0)):
            q_start = (n_q_tiles - 1 - tile // B) * BLOCK_Q
            _one_tile(
                q_start, tile % B, desc_q, desc_k, desc_v, desc_o, L, N, scale_log2, D, BLOCK_Q, BLOCK_K, POLY, ROTATE
            )
    else:
        q_start = (n_q_tiles - 1 - tl.program_id(0)) * BLOCK_Q
        _one_tile(
            q_start,
            tl.program_id(1),
            desc_q,
            desc_k,
            desc_v,
            desc_o,
            L,
            N,
            scale_log2,
            D,
            BLOCK_Q,
            BLOCK_K,
            POLY,
            ROTATE,
        )
