"""The FlashAttention backward for Hopper (sm_90), in Gluon, warp-specialized as the forward's
``_fwd_ws_kernel``: each program holds 128 rows of one operand pair fixed, and two consumer
warpgroups of 64 rows stream the other pair's tiles, which a loader warp brings by TMA.

Two kernels, deterministic, as the portable backward (``flash_triton``): seven products in all, and
no atomics.

- ``_dq_kernel``: 128 query rows a program, with Q and dO fixed and K, V streamed. Per key tile it
  computes S = Q K^T, dP = dO V^T, then P, dS = P (dP - Delta) and dQ += dS K. It also writes
  Delta = rowsum(O dO) for the next kernel.
- ``_dkdv_kernel``: 128 keys a program, with K and V fixed and Q, dO streamed. Per query tile, keys
  along rows as in the portable kernel, it computes S^T = K Q^T and dP^T = V dO^T, then
  dV += P^T dO and dK += dS^T Q. P^T and dS^T feed the last two products from registers.

Why: the Gluon dK/dV kernel of one warpgroup a program (notes/flash-hopper.md, variant 11) was no
faster than the portable one. Warp specialization made the forward 5% faster at the leaderboard
shape and 23% at d = 128 (variant 18); these kernels try the same structure on the backward
(variant 19). They are used where ``unsupported`` has no objection: the forward's conditions, d = 64
only, and rows longer than ``flash_gluon.SHORT``.
"""

import math

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from lmperf.attention import flash_gluon
from lmperf.attention.flash_gluon import LOG2E, WS_CONSUMER_REGS, WS_LAUNCH_REGS, WS_LOADER_REGS, _as_rows, _origin

ROWS = 64  # rows of each consumer warpgroup, and of each streamed query tile
DQ_KEY_TILE = 64  # keys a step of the dQ consumers
STAGES = gl.constexpr(2)  # ring slots of the streamed pair
ATOMIC_DQ = False  # experiment: dQ in the dK/dV kernel, added in fp32 by atomics (5 products, not 7)


@gluon.jit
def _loader(fixed, stream, bars, out, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """The loader warp of both kernels: the program's fixed pair (two tiles each of A and B, one per
    consumer) once, then the streamed pair (C, D) tile by tile into a ring of STAGES slots, a slot
    refilled once both consumers have released it. (WG, IS_CAUSAL and out are unused: the
    partitions share one signature.)"""
    a_desc, a_row, a_col, b_desc, b_row, b_col, a_smem, b_smem, row0 = fixed
    c_desc, c_row, c_col, d_desc, d_row, d_col, c_smem, d_smem, start, n_steps = stream
    fixed_bar, ready, empty = bars
    FIXED_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    STEP: gl.constexpr = c_desc.block_type.shape[0]
    N_STAGES: gl.constexpr = c_smem.type.shape[0]
    mbarrier.expect(fixed_bar, 2 * (a_desc.block_type.nbytes + b_desc.block_type.nbytes))
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(a_desc, [a_row + row0 + w * FIXED_ROWS, a_col], fixed_bar, a_smem.index(w))
        tma.async_copy_global_to_shared(b_desc, [b_row + row0 + w * FIXED_ROWS, b_col], fixed_bar, b_smem.index(w))
    for i in range(n_steps):
        slot = i % N_STAGES
        mbarrier.wait(empty.index(slot), ((i // N_STAGES) & 1) ^ 1)  # starts as if phase 1 had completed
        mbarrier.expect(ready.index(slot), c_desc.block_type.nbytes + d_desc.block_type.nbytes)
        row = start + i * STEP
        tma.async_copy_global_to_shared(c_desc, [c_row + row, c_col], ready.index(slot), c_smem.index(slot))
        tma.async_copy_global_to_shared(d_desc, [d_row + row, d_col], ready.index(slot), d_smem.index(slot))


@gluon.jit
def _dq_consumer(fixed, stream, bars, out, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """dQ of query rows [q0 + 64 WG, q0 + 64 WG + 64), over the key tiles the loader brings; and
    Delta of those rows, which the dK/dV kernel reads."""
    q_desc, q_row, q_col, do_desc, do_row, do_col, q_smem, do_smem, q0 = fixed
    k_desc, k_row, k_col, v_desc, v_row, v_col, k_smem, v_smem, k_start, n_tiles = stream
    fixed_bar, ready, empty = bars
    dQ, O, L, Delta, N, bh, stride_dq, stride_o, scale, scale_log2 = out
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    N_STAGES: gl.constexpr = k_smem.type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    ds_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_acc: gl.constexpr = gl.SliceLayout(1, acc_layout)

    rows0 = q0 + WG * BLOCK_M
    q_rows = rows0 + gl.arange(0, BLOCK_M, layout=row_s)
    acc_rows = rows0 + gl.arange(0, BLOCK_M, layout=row_acc)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    o = gl.load(O + acc_rows[:, None] * stride_o + cols[None, :]).to(gl.float32)
    lse2 = gl.load(L + bh * N + q_rows) * 1.4426950408889634

    mbarrier.wait(fixed_bar, 0)
    delta = gl.sum(o * do_smem.index(WG).load(acc_layout).to(gl.float32), 1)
    gl.store(Delta + bh * N + acc_rows, delta)
    delta = gl.convert_layout(delta, row_s)
    q = q_smem.index(WG).load(op_layout)
    do = do_smem.index(WG).load(op_layout)

    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    dq = gl.zeros([BLOCK_M, D], gl.float32, acc_layout)
    for j in range(n_tiles):
        slot = j % N_STAGES
        mbarrier.wait(ready.index(slot), (j // N_STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        dp = warpgroup_mma(do, v_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(1, deps=(s,))  # S is done; dP may still run
        p = gl.exp2(s * scale_log2 - lse2[:, None])
        if IS_CAUSAL:  # every tile: a runtime `if j >= first tile on the diagonal` gave wrong dQ (variant 19)
            keys = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            p = gl.where(q_rows[:, None] >= keys[None, :], p, 0.0)
        dp = warpgroup_mma_wait(0, deps=(dp,))
        ds = gl.convert_layout((p * (dp - delta[:, None])).to(dtype), ds_layout)
        dq = warpgroup_mma(ds, k_smem.index(slot), dq, is_async=True)
        dq, ds = warpgroup_mma_wait(0, deps=(dq, ds))
        mbarrier.arrive(empty.index(slot), count=1)

    gl.store(dQ + acc_rows[:, None] * stride_dq + cols[None, :], (dq * scale).to(dtype))


@gluon.jit
def _dkdv_consumer(fixed, stream, bars, out, WG: gl.constexpr, IS_CAUSAL: gl.constexpr, ATOMIC_DQ: gl.constexpr):
    """dK and dV of keys [k0 + 64 WG, k0 + 64 WG + 64), over the query tiles the loader brings.
    Keys along rows: K and V sit in registers as the left operands of S^T = K Q^T and dP^T = V dO^T,
    and P^T and dS^T feed dV and dK from registers. P^T is computed while dP^T runs."""
    k_desc, k_row, k_col, v_desc, v_row, v_col, k_smem, v_smem, k0 = fixed
    q_desc, q_row, q_col, do_desc, do_row, do_col, q_smem, do_smem, q_start, n_steps = stream
    fixed_bar, ready, empty = bars
    dK, dV, L, Delta, N, bh, stride_dk, stride_dv, scale, scale_log2, dQ_acc, ds_smem = out
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]  # keys of this warpgroup
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]  # queries a step
    D: gl.constexpr = q_desc.block_type.shape[1]
    N_STAGES: gl.constexpr = q_smem.type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    kv_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=st_layout, k_width=2)
    pt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    col: gl.constexpr = gl.SliceLayout(0, st_layout)

    keys0 = k0 + WG * BLOCK_N
    keys = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
    # causal: the first steps' queries cross the diagonal of the program's 2 x BLOCK_N keys
    n_masked: gl.constexpr = 2 * BLOCK_N // BLOCK_M if IS_CAUSAL else 0
    mbarrier.wait(fixed_bar, 0)
    k = k_smem.index(WG).load(kv_layout)
    v = v_smem.index(WG).load(kv_layout)

    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    dk = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    dv = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    zero_acc = gl.zeros([BLOCK_M, D], gl.float32, acc_layout)
    acc_cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    for i in range(n_steps):
        slot = i % N_STAGES
        queries = q_start + i * BLOCK_M + gl.arange(0, BLOCK_M, layout=col)
        lse2 = gl.load(L + bh * N + queries) * 1.4426950408889634
        delta = gl.load(Delta + bh * N + queries)
        mbarrier.wait(ready.index(slot), (i // N_STAGES) & 1)
        st = warpgroup_mma(k, q_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v, do_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(1, deps=(st,))  # S^T is done; dP^T may still run
        pt = gl.exp2(st * scale_log2 - lse2[None, :])
        if i < n_masked:
            pt = gl.where(queries[None, :] >= keys[:, None], pt, 0.0)
        dpt = warpgroup_mma_wait(0, deps=(dpt,))
        pt_op = gl.convert_layout(pt.to(dtype), pt_layout)
        dst_op = gl.convert_layout((pt * (dpt - delta[None, :])).to(dtype), pt_layout)
        if ATOMIC_DQ:  # dS^T to shared memory, where the dQ product reads it transposed
            ds_smem.index(WG).store(dst_op)
            fence_async_shared()
        dv = warpgroup_mma(pt_op, do_smem.index(slot), dv, is_async=True)
        dk = warpgroup_mma(dst_op, q_smem.index(slot), dk, is_async=True)
        if ATOMIC_DQ:  # this warpgroup's share of the step's dQ = dS K, added to dQ_acc in fp32
            ds = ds_smem.index(WG).permute((1, 0))
            dq = warpgroup_mma(ds, k_smem.index(WG), zero_acc, use_acc=False, is_async=True)
            dv, dk, dq, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, dq, pt_op, dst_op))
            mbarrier.arrive(empty.index(slot), count=1)
            rows = q_start + i * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
            gl.atomic_add(dQ_acc + (bh * N + rows)[:, None] * D + acc_cols[None, :], dq, sem="relaxed")
        else:
            dv, dk, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, pt_op, dst_op))
            mbarrier.arrive(empty.index(slot), count=1)

    rows = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    gl.store(dK + rows[:, None] * stride_dk + cols[None, :], (dk * scale).to(dtype))
    gl.store(dV + rows[:, None] * stride_dv + cols[None, :], dv.to(dtype))


@gluon.jit
def _shared(fixed_descs, stream_descs, row0, start, n_steps):
    """A program's shared memory and barriers, as the partitions' (fixed, stream, bars) arguments.
    fixed_descs and stream_descs: (descriptor, row, column) of A and B, and of C and D."""
    a_desc, a_row, a_col, b_desc, b_row, b_col = fixed_descs
    c_desc, c_row, c_col, d_desc, d_row, d_col = stream_descs
    dtype: gl.constexpr = a_desc.dtype
    a_smem = gl.allocate_shared_memory(dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(dtype, [STAGES] + c_desc.block_type.shape, c_desc.layout)
    d_smem = gl.allocate_shared_memory(dtype, [STAGES] + d_desc.block_type.shape, d_desc.layout)
    fixed_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(fixed_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # released by both consumer warpgroups
    fixed = (a_desc, a_row, a_col, b_desc, b_row, b_col, a_smem, b_smem, row0)
    stream = (c_desc, c_row, c_col, d_desc, d_row, d_col, c_smem, d_smem, start, n_steps)
    return fixed, stream, (fixed_bar, ready, empty)


@gluon.jit
def _dq_kernel(
    q_desc, k_desc, v_desc, do_desc, dQ, O, L, Delta, N, H,
    q_rows_b, q_stride_h, q_row_len, k_rows_b, k_stride_h, k_row_len,
    v_rows_b, v_stride_h, v_row_len, do_rows_b, do_stride_h, do_row_len,
    stride_dqb, stride_dqh, stride_dqn, stride_ob, stride_oh, stride_on, scale, scale_log2,
    IS_CAUSAL: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """dQ and Delta of 128 query rows: Q and dO fixed, K and V streamed. Heaviest causal tiles first."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    q0 = (gl.num_programs(0) - 1 - gl.program_id(0)) * 2 * BLOCK_M
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)
    do_row, do_col = _origin(bh, H, do_rows_b, do_stride_h, do_row_len)
    n_tiles = (q0 + 2 * BLOCK_M) // BLOCK_N if IS_CAUSAL else N // BLOCK_N
    dQ += (bh // H) * stride_dqb + (bh % H) * stride_dqh
    O += (bh // H) * stride_ob + (bh % H) * stride_oh
    out = (dQ, O, L, Delta, N, bh, stride_dqn, stride_on, scale, scale_log2)
    fixed = (q_desc, q_row, q_col, do_desc, do_row, do_col)
    stream = (k_desc, k_row, k_col, v_desc, v_row, v_col)
    fixed, stream, bars = _shared(fixed, stream, q0, 0, n_tiles)
    gl.warp_specialize(
        [
            (_dq_consumer, (fixed, stream, bars, out, 0, IS_CAUSAL)),
            (_dq_consumer, (fixed, stream, bars, out, 1, IS_CAUSAL)),
            (_loader, (fixed, stream, bars, out, 1, IS_CAUSAL)),
        ],
        [4, 1],
        [WS_CONSUMER_REGS, WS_LOADER_REGS],
    )


@gluon.jit
def _dkdv_kernel(
    q_desc, k_desc, v_desc, do_desc, dK, dV, L, Delta, N, H,
    q_rows_b, q_stride_h, q_row_len, k_rows_b, k_stride_h, k_row_len,
    v_rows_b, v_stride_h, v_row_len, do_rows_b, do_stride_h, do_row_len,
    stride_dkb, stride_dkh, stride_dkn, stride_dvb, stride_dvh, stride_dvn, scale, scale_log2, dQ_acc,
    IS_CAUSAL: gl.constexpr, ATOMIC_DQ: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """dK and dV of 128 keys: K and V fixed, Q and dO streamed. Causal, the first key tiles see the
    most queries, so the grid's order is already heaviest first."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    k0 = gl.program_id(0) * 2 * BLOCK_N
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)
    do_row, do_col = _origin(bh, H, do_rows_b, do_stride_h, do_row_len)
    q_start = k0 if IS_CAUSAL else 0  # earlier queries see none of these keys
    dK += (bh // H) * stride_dkb + (bh % H) * stride_dkh
    dV += (bh // H) * stride_dvb + (bh % H) * stride_dvh
    ds_smem = gl.allocate_shared_memory(q_desc.dtype, [2, BLOCK_N, BLOCK_M], q_desc.layout)  # used if ATOMIC_DQ
    out = (dK, dV, L, Delta, N, bh, stride_dkn, stride_dvn, scale, scale_log2, dQ_acc, ds_smem)
    fixed = (k_desc, k_row, k_col, v_desc, v_row, v_col)
    stream = (q_desc, q_row, q_col, do_desc, do_row, do_col)
    fixed, stream, bars = _shared(fixed, stream, k0, q_start, (N - q_start) // BLOCK_M)
    gl.warp_specialize(
        [
            (_dkdv_consumer, (fixed, stream, bars, out, 0, IS_CAUSAL, ATOMIC_DQ)),
            (_dkdv_consumer, (fixed, stream, bars, out, 1, IS_CAUSAL, ATOMIC_DQ)),
            (_loader, (fixed, stream, bars, out, 1, IS_CAUSAL)),
        ],
        [4, 1],
        [WS_CONSUMER_REGS, WS_LOADER_REGS],
    )


def unsupported(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, dO: torch.Tensor) -> str:
    """Why this backward cannot take these (batch, heads, n, d) inputs ('' if it can): the Gluon
    forward's conditions, d = 64, more than flash_gluon.SHORT keys, and a dO one descriptor addresses."""
    why = flash_gluon.unsupported(Q, K, V)
    n, d = Q.shape[-2:]
    if not why and d != 64:
        why = f"head size {d}: 64 only"
    if not why and n <= flash_gluon.SHORT:
        why = f"{n} keys: more than {flash_gluon.SHORT} only"
    if not why and not flash_gluon._addressable(dO):
        why = "a dO layout that one 2-D TMA descriptor cannot address"
    return why


def backward(Q, K, V, O, dO, L, dQ, dK, dV, is_causal: bool) -> None:
    """Write the gradients of attention of (batch, heads, n, d) Q, K, V into dQ, dK, dV (any strides)
    from its output O, logsumexp L (batch, heads, n, contiguous) and dO. Call only where
    ``unsupported`` returns ''. Under torch.compile this is the custom op
    ``lmperf::gluon_attention_backward``, as the forward is ``lmperf::gluon_attention_forward``."""
    if torch.compiler.is_compiling():
        torch.ops.lmperf.gluon_attention_backward(Q, K, V, O, dO, L, dQ, dK, dV, is_causal)
    else:
        _launch(Q, K, V, O, dO, L, dQ, dK, dV, is_causal)


def _launch(Q, K, V, O, dO, L, dQ, dK, dV, is_causal: bool) -> None:
    batch, heads, n, d = Q.shape
    Q, K, V, dO = (x if x.data_ptr() % 16 == 0 else x.clone() for x in (Q, K, V, dO))  # TMA's alignment
    q, k, v, do = (_as_rows(x, ROWS) for x in (Q, K, V, dO))
    scales = (1 / math.sqrt(d), LOG2E / math.sqrt(d))
    grid = (n // (2 * ROWS), batch * heads)
    if ATOMIC_DQ:
        delta = (O.float() * dO.float()).sum(-1)
        dQ_acc = torch.zeros(batch, heads, n, d, device=Q.device, dtype=torch.float32)
        _dkdv_kernel[grid](
            q[0], k[0], v[0], do[0], dK, dV, L, delta, n, heads,
            *q[1:], *k[1:], *v[1:], *do[1:], *dK.stride()[:3], *dV.stride()[:3], *scales, dQ_acc,
            IS_CAUSAL=is_causal, ATOMIC_DQ=True, num_warps=4, maxnreg=WS_LAUNCH_REGS,
        )  # fmt: skip
        dQ.copy_(dQ_acc * scales[0])
        return
    delta = torch.empty_like(L)  # written by _dq_kernel, read by _dkdv_kernel
    k_tiles, v_tiles = _as_rows(K, DQ_KEY_TILE), _as_rows(V, DQ_KEY_TILE)
    _dq_kernel[grid](
        q[0], k_tiles[0], v_tiles[0], do[0], dQ, O, L, delta, n, heads,
        *q[1:], *k_tiles[1:], *v_tiles[1:], *do[1:], *dQ.stride()[:3], *O.stride()[:3], *scales,
        IS_CAUSAL=is_causal, num_warps=4, maxnreg=WS_LAUNCH_REGS,
    )  # fmt: skip
    _dkdv_kernel[grid](
        q[0], k[0], v[0], do[0], dK, dV, L, delta, n, heads,
        *q[1:], *k[1:], *v[1:], *do[1:], *dK.stride()[:3], *dV.stride()[:3], *scales, delta,
        IS_CAUSAL=is_causal, ATOMIC_DQ=False, num_warps=4, maxnreg=WS_LAUNCH_REGS,
    )  # fmt: skip


_LIBRARY = torch.library.Library("lmperf", "FRAGMENT")
_LIBRARY.define(
    "gluon_attention_backward(Tensor Q, Tensor K, Tensor V, Tensor O, Tensor dO, Tensor L, "
    "Tensor(a!) dQ, Tensor(b!) dK, Tensor(c!) dV, bool is_causal) -> ()"
)
_LIBRARY.impl("gluon_attention_backward", _launch, "CUDA")
torch.library.register_fake("lmperf::gluon_attention_backward", lambda *args: None, lib=_LIBRARY)
