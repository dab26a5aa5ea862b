"""The FlashAttention forward for Hopper (sm_90), in Gluon: the softmax of one key tile runs while the
tensor cores compute the previous tile's P V, as in FlashAttention-3.

Why Gluon: Triton's ``tl.dot`` waits for each wgmma as soon as it is issued, so the softmax and the
products take turns (notes/flash-hopper.md, variants 3 and 4). Here each step issues S_j = Q K_j^T
and O += P_{j-1} V_{j-1} asynchronously, waits for S_j alone, computes the online softmax of S_j
while the P V product runs, then waits for it and rescales O. Q stays in registers; K and V tiles
arrive by TMA into a ring of ``STAGES`` shared-memory buffers, each refilled once the product that
reads it has completed. One warpgroup per program (64 query rows), two programs per SM.

Rows longer than SHORT take ``_fwd_ws_kernel`` instead, the same loop warp-specialized (variant 18):
one program an SM with two such warpgroups, which share each K and V tile, and a loader warp that
issues the TMA loads. At the leaderboard shape it is 5% faster than two programs an SM, and ahead of
cuDNN's forward.

Where that grid leaves SMs idle (batch 1 and a few thousand keys), several programs share a query
tile's key tiles (``key_splits``) and ``_combine`` merges their results by logsumexp (variant 12).

Same outputs as the portable kernel (``flash_attention``): O, and L the natural-log logsumexp, so its
backward takes over unchanged. Used where ``unsupported()`` has no objection: an sm_90 GPU, bf16 or
fp16, d of 64 or 128, as many keys as queries, a multiple of 128, and rows that a 2-D TMA
descriptor can address (the model's (batch, seq, heads, d) projections can).
"""

import functools
import math

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from lmperf.kernels.triton_launcher import Launcher

LOG2E = 1.4426950408889634
BLOCK_M, NUM_WARPS = 64, 4  # 64 query rows: one warpgroup
HEAD_SIZES = (64, 128)
SHORT = 2048  # at d = 64, up to this many keys a 64-key tile is faster than a 128-key one
# Rows longer than SHORT, unsplit: two consumer warpgroups and a loader warp a program, one program an SM
# (_fwd_ws_kernel). Three warpgroups start at 168 registers a thread; setmaxnreg then moves them.
WS_LAUNCH_REGS = 168
WS_CONSUMER_REGS = gl.constexpr(240)
WS_LOADER_REGS = gl.constexpr(24)


def tiling(n: int, d: int) -> tuple[int, int]:
    """(key tile, ring stages) of _fwd_kernel for n keys at head size d (rows up to SHORT, or split):
    what was fastest on an H100 (notes/flash-hopper.md, variants 10, 13 and 22). At d = 64, 128 keys in
    2 stages from 4096 keys on (the leaderboard's 16384: 1.28 ms against 1.43 with 64); otherwise 64
    keys in 2 stages: 4-11% faster than 128 keys from 256 to 2048 keys, and 1-6% faster than 3 stages
    at the model's contexts, since 41 KB of shared memory let four programs share an SM where 57 KB
    let three."""
    if d == 64 and n > SHORT:
        return 128, 2
    return 64, 2


GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


@gluon.jit
def _load_tile(desc, row, col, bar, dst, pred):
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, col], bar, dst, pred=pred)


@gluon.constexpr_function
def mma_layout(n, warps=4):
    """The layout of a wgmma accumulator of n columns, its warps stacked along the rows."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, n, 16])


@gluon.constexpr_function
def left_operand(accumulator):
    """The layout of a wgmma's left operand held in registers, for an accumulator laid out so."""
    return gl.DotOperandLayout(operand_index=0, parent=accumulator, k_width=2)


@gluon.jit
def _origin(bh, H, rows_per_batch, stride_h, row_len):
    """(row, column) of head bh's first element in its tensor viewed as rows of row_len elements."""
    offset = (bh % H) * stride_h
    return (bh // H) * rows_per_batch + offset // row_len, offset % row_len


@gluon.jit
def _softmax(s, m, l, q_rows, k0, scale_log2, BLOCK_N: gl.constexpr, MASK: gl.constexpr, s_layout: gl.constexpr):
    """One online-softmax step on raw scores: (P, alpha, m, l), the row max m in log2 units."""
    if MASK:
        keys = k0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        s = gl.where(q_rows[:, None] >= keys[None, :], s, float("-inf"))
    m_new = gl.maximum(m, gl.max(s, 1) * scale_log2)
    p = gl.exp2(s * scale_log2 - m_new[:, None])  # the scale folded into one FFMA (variant 1)
    alpha = gl.exp2(m - m_new)
    return p, alpha, m_new, l * alpha + gl.sum(p, 1)


@gluon.jit
def _products(q, k_smem, k_bars, p, v_smem, v_bars, acc, zero_s, t):
    """Issue S_t = Q K_t^T and O += P_{t-1} V_{t-1} for the t-th key tile of a ring of K and V
    slots, each once its tile has landed, and wait for S_t alone: (S_t, O still in flight). The
    softmax of S_t then runs while P V does."""
    STAGES: gl.constexpr = k_smem.type.shape[0]
    slot = t % STAGES
    prev = (t - 1) % STAGES
    mbarrier.wait(k_bars.index(slot), (t // STAGES) & 1)
    s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    mbarrier.wait(v_bars.index(prev), ((t - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s,))
    return s, acc


@gluon.jit
def _softmax_tile(s, m, l, q_rows, k0, scale_log2, masked, BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    """_softmax of a tile in the loop: masked only where it crosses the diagonal."""
    if masked:
        p, alpha, m, l = _softmax(s, m, l, q_rows, k0, scale_log2, BLOCK_N, True, s_layout)
    else:
        p, alpha, m, l = _softmax(s, m, l, q_rows, k0, scale_log2, BLOCK_N, False, s_layout)
    return p, alpha, m, l


@gluon.jit
def _fwd_kernel(
    q_desc,
    k_desc,
    v_desc,
    O,
    L,
    N,
    H,
    q_rows_b,
    q_stride_h,
    q_row_len,
    k_rows_b,
    k_stride_h,
    k_row_len,
    v_rows_b,
    v_stride_h,
    v_row_len,
    stride_ob,
    stride_oh,
    stride_on,
    O_part,
    L_part,
    scale_log2,
    IS_CAUSAL: gl.constexpr,
    STAGES: gl.constexpr,
    SPLITS: gl.constexpr,
    num_warps: gl.constexpr,
):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype

    tile = gl.program_id(0) // SPLITS
    split = gl.program_id(0) % SPLITS
    q0 = (gl.num_programs(0) // SPLITS - 1 - tile) * BLOCK_M  # heaviest causal tiles first
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)

    s_layout: gl.constexpr = mma_layout(BLOCK_N, num_warps)
    o_layout: gl.constexpr = mma_layout(D, num_warps)
    q_layout: gl.constexpr = left_operand(s_layout)
    p_layout: gl.constexpr = left_operand(o_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    if IS_CAUSAL:
        n_tiles = gl.cdiv(q0 + BLOCK_M, BLOCK_N)
        first_masked = q0 // BLOCK_N  # key tiles from here on cross the diagonal
    else:
        n_tiles = gl.cdiv(N, BLOCK_N)
        first_masked = n_tiles
    # This program's key tiles [lo, hi): its share of the query tile's when SPLITS > 1. A split with
    # no share redoes the last tile (never waits on a load not issued); _combine ignores it.
    chunk = gl.cdiv(n_tiles, SPLITS)
    lo = gl.minimum(split * chunk, n_tiles - 1)
    hi = gl.maximum(gl.minimum(split * chunk + chunk, n_tiles), lo + 1)

    _load_tile(q_desc, q_row + q0, q_col, q_bar, q_smem, True)
    for i in gl.static_range(STAGES):
        _load_tile(k_desc, k_row + (lo + i) * BLOCK_N, k_col, k_bars.index(i), k_smem.index(i), lo + i < hi)
        _load_tile(v_desc, v_row + (lo + i) * BLOCK_N, v_col, v_bars.index(i), v_smem.index(i), lo + i < hi)

    q_rows = q0 + gl.arange(0, BLOCK_M, layout=row_s)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
    l = gl.zeros([BLOCK_M], gl.float32, row_s)

    # key tile lo: nothing to overlap with yet
    mbarrier.wait(q_bar, 0)
    q = q_smem.load(q_layout)  # in registers, each S = Q K^T reads only K from shared memory
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s,))
    _load_tile(k_desc, k_row + (lo + STAGES) * BLOCK_N, k_col, k_bars.index(0), k_smem.index(0), lo + STAGES < hi)
    p, alpha, m, l = _softmax(s, m, l, q_rows, lo * BLOCK_N, scale_log2, BLOCK_N, IS_CAUSAL, s_layout)
    p = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(lo + 1, hi):  # key tile j sits in ring slot (j - lo) % STAGES
        slot = (j - lo) % STAGES
        prev = (j - lo - 1) % STAGES
        s, acc = _products(q, k_smem, k_bars, p, v_smem, v_bars, acc, zero_s, j - lo)
        refill = j + STAGES < hi
        _load_tile(k_desc, k_row + (j + STAGES) * BLOCK_N, k_col, k_bars.index(slot), k_smem.index(slot), refill)
        p_new, alpha, m, l = _softmax_tile(
            s, m, l, q_rows, j * BLOCK_N, scale_log2, j >= first_masked, BLOCK_N, s_layout
        )
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        refill = j - 1 + STAGES < hi
        _load_tile(v_desc, v_row + (j - 1 + STAGES) * BLOCK_N, v_col, v_bars.index(prev), v_smem.index(prev), refill)
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        p = gl.convert_layout(p_new.to(dtype), p_layout)

    last = (hi - 1 - lo) % STAGES
    mbarrier.wait(v_bars.index(last), ((hi - 1 - lo) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))

    out = acc / gl.convert_layout(l, row_o)[:, None]
    rows = q0 + gl.arange(0, BLOCK_M, layout=row_o)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    if SPLITS == 1:
        O += (bh // H) * stride_ob + (bh % H) * stride_oh
        gl.store(O + rows[:, None] * stride_on + cols[None, :], out.to(dtype))
        gl.store(L + bh * N + q_rows, (m + gl.log2(l)) * 0.6931471805599453)  # log2 to natural log
    else:  # this split's normalized O and its logsumexp (log2 units), for _combine
        part = (split * gl.num_programs(1) + bh) * N
        gl.store(O_part + (part + rows)[:, None] * D + cols[None, :], out)
        gl.store(L_part + part + q_rows, m + gl.log2(l))


@gluon.jit
def _ws_loader(args, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """The loader warp of _fwd_ws_kernel: both query tiles once, then each key tile's K and V into
    the ring, a slot refilled once both consumer warpgroups have released it. (WG and IS_CAUSAL are
    unused: worker partitions share one signature.)"""
    descs, smem, bars, pos, out = args
    q_desc, k_desc, v_desc = descs
    q_smem, k_smem, v_smem = smem
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    q_row, q_col, k_row, k_col, v_row, v_col, q0, n_tiles, first_masked = pos
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row + q0, q_col], q_bar, q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + q0 + BLOCK_M, q_col], q_bar, q_smem.index(1))
    for j in range(n_tiles):
        slot = j % STAGES
        released = ((j // STAGES) & 1) ^ 1  # an mbarrier starts as if its phase 1 had completed
        mbarrier.wait(k_empty.index(slot), released)
        _load_tile(k_desc, k_row + j * BLOCK_N, k_col, k_ready.index(slot), k_smem.index(slot), True)
        mbarrier.wait(v_empty.index(slot), released)
        _load_tile(v_desc, v_row + j * BLOCK_N, v_col, v_ready.index(slot), v_smem.index(slot), True)


@gluon.jit
def _ws_consumer(args, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """Query rows [q0 + 64 WG, q0 + 64 WG + 64) of a _fwd_ws_kernel program: _fwd_kernel's loop over
    the key tiles the loader warp brings, each slot released once this warpgroup's products read it."""
    descs, smem, bars, pos, out = args
    q_desc, k_desc, v_desc = descs
    q_smem, k_smem, v_smem = smem
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    q_row, q_col, k_row, k_col, v_row, v_col, q0, n_tiles, first_masked = pos
    O, L, N, bh, stride_o, scale_log2 = out
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = mma_layout(BLOCK_N)
    o_layout: gl.constexpr = mma_layout(D)
    q_layout: gl.constexpr = left_operand(s_layout)
    p_layout: gl.constexpr = left_operand(o_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    rows0 = q0 + WG * BLOCK_M
    q_rows = rows0 + gl.arange(0, BLOCK_M, layout=row_s)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
    l = gl.zeros([BLOCK_M], gl.float32, row_s)

    # key tile 0: nothing to overlap with yet
    mbarrier.wait(q_bar, 0)
    q = q_smem.index(WG).load(q_layout)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s,))
    mbarrier.arrive(k_empty.index(0), count=1)
    p, alpha, m, l = _softmax(s, m, l, q_rows, 0, scale_log2, BLOCK_N, IS_CAUSAL, s_layout)
    p = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n_tiles):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        s, acc = _products(q, k_smem, k_ready, p, v_smem, v_ready, acc, zero_s, j)
        mbarrier.arrive(k_empty.index(slot), count=1)
        p_new, alpha, m, l = _softmax_tile(
            s, m, l, q_rows, j * BLOCK_N, scale_log2, j >= first_masked, BLOCK_N, s_layout
        )
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        mbarrier.arrive(v_empty.index(prev), count=1)
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        p = gl.convert_layout(p_new.to(dtype), p_layout)

    last = (n_tiles - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_tiles - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(v_empty.index(last), count=1)

    rows = rows0 + gl.arange(0, BLOCK_M, layout=row_o)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    gl.store(O + rows[:, None] * stride_o + cols[None, :], (acc / gl.convert_layout(l, row_o)[:, None]).to(dtype))
    gl.store(L + bh * N + q_rows, (m + gl.log2(l)) * 0.6931471805599453)  # log2 to natural log


@gluon.jit
def _fwd_ws_kernel(
    q_desc, k_desc, v_desc, O, L, N, H,
    q_rows_b, q_stride_h, q_row_len, k_rows_b, k_stride_h, k_row_len, v_rows_b, v_stride_h, v_row_len,
    stride_ob, stride_oh, stride_on, scale_log2,
    IS_CAUSAL: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """_fwd_kernel warp-specialized (variant 18): 128 query rows a program and one program an SM, as
    two consumer warpgroups of 64 rows (the default partition and a worker) that share each K and V
    tile, which one loader warp brings by TMA. Key tiles of 128 = 2 x 64 rows, so that both
    warpgroups walk the same tiles."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    gl.static_assert(BLOCK_N == 2 * BLOCK_M)
    q0 = (gl.num_programs(0) - 1 - gl.program_id(0)) * BLOCK_N  # heaviest causal tiles first
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)

    q_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # released by both consumer warpgroups
        mbarrier.init(v_empty.index(i), count=2)

    if IS_CAUSAL:
        n_tiles = q0 // BLOCK_N + 1
        first_masked = q0 // BLOCK_N  # the last tile crosses the diagonal
    else:
        n_tiles = gl.cdiv(N, BLOCK_N)
        first_masked = n_tiles
    pos = (q_row, q_col, k_row, k_col, v_row, v_col, q0, n_tiles, first_masked)
    out = (O + (bh // H) * stride_ob + (bh % H) * stride_oh, L, N, bh, stride_on, scale_log2)
    args = ((q_desc, k_desc, v_desc), (q_smem, k_smem, v_smem), (q_bar, k_ready, k_empty, v_ready, v_empty), pos, out)
    gl.warp_specialize(
        [
            (_ws_consumer, (args, 0, IS_CAUSAL)),
            (_ws_consumer, (args, 1, IS_CAUSAL)),
            (_ws_loader, (args, 1, IS_CAUSAL)),
        ],
        [4, 1],
        [WS_CONSUMER_REGS, WS_LOADER_REGS],
    )


@triton.jit
def _combine(
    O_part, L_part, O, L, N, H, stride_ob, stride_oh, stride_on,
    BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, SPLITS: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    """O and L of one query tile from the SPLITS partial results _fwd_kernel left: each split's O
    weighted by 2^(its logsumexp - the total's). Splits with no key tiles of their own are skipped."""
    q0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    n_tiles = tl.cdiv(q0 + BLOCK_M, BLOCK_N) if IS_CAUSAL else tl.cdiv(N, BLOCK_N)
    valid = tl.cdiv(n_tiles, tl.cdiv(n_tiles, SPLITS))
    rows = q0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, D)
    total = tl.full([BLOCK_M], float("-inf"), tl.float32)
    for split in tl.static_range(SPLITS):
        lse = tl.load(L_part + (split * tl.num_programs(1) + bh) * N + rows)
        total = tl.maximum(total, tl.where(split < valid, lse, float("-inf")))
    weights = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for split in tl.static_range(SPLITS):
        part = (split * tl.num_programs(1) + bh) * N
        lse = tl.load(L_part + part + rows)
        w = tl.where(split < valid, tl.exp2(lse - total), 0.0)
        o = tl.load(O_part + (part + rows)[:, None] * D + cols[None, :], mask=split < valid, other=0.0)
        acc += w[:, None] * o
        weights += w
    O += (bh // H) * stride_ob + (bh % H) * stride_oh
    tl.store(O + rows[:, None] * stride_on + cols[None, :], (acc / weights[:, None]).to(O.dtype.element_ty))
    tl.store(L + bh * N + rows, (total + tl.log2(weights)) * 0.6931471805599453)


@functools.cache
def _shared_layout(block: tuple[int, int], dtype) -> gl.NVMMASharedLayout:
    return gl.NVMMASharedLayout.get_default_for(list(block), dtype)


def _as_rows(x: torch.Tensor, block: int):
    """x (batch, heads, n, d) as a TMA descriptor over rows of x.stride(2) elements, and the numbers
    that place head (b, h) in it: rows per batch, the head stride, the row length."""
    batch, heads, n, d = x.shape
    row_len = x.stride(2)
    rows = ((batch - 1) * x.stride(0) + (heads - 1) * x.stride(1)) // row_len + n
    desc = TensorDescriptor(
        x, [rows, row_len], [row_len, 1], [block, d], _shared_layout((block, d), GL_DTYPES[x.dtype])
    )
    return desc, x.stride(0) // row_len, x.stride(1), row_len


def tma_aligned(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors, each cloned into fresh storage where its base is not 16-byte aligned, as TMA needs
    (contiguous() would return a view that starts mid-row as it is). Checked at run time (in
    flash_attention, by the plans' key), not in unsupported(): torch.compile breaks its graph on
    storage_offset and data_ptr."""
    return tuple(x if x.data_ptr() % 16 == 0 else x.clone() for x in tensors)


def _addressable(x: torch.Tensor) -> bool:
    """Every head's (n, d) block is rows of one 2-D view: row stride stride(2), a head inside one row."""
    batch, heads, n, d = x.shape
    sb, sh, row_len, sd = x.stride()
    if sd != 1 or row_len < d or row_len % 8 or sb % row_len:
        return False
    return sh % row_len == 0 or (heads - 1) * sh + d <= row_len


def unsupported(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, capability: tuple[int, int] | None = None) -> str:
    """Why the Gluon forward cannot take these (batch, heads, n, d) inputs ('' if it can) on a GPU of
    this compute capability (by default Q's GPU's; a CPU has none)."""
    if capability is None and Q.device.type == "cuda":
        capability = torch.cuda.get_device_capability(Q.device)
    if capability != (9, 0):
        return "needs an sm_90 (Hopper) GPU"
    if Q.dtype not in GL_DTYPES:
        return f"dtype {Q.dtype}: bf16 or fp16 only"
    n, d = Q.shape[-2:]
    if d not in HEAD_SIZES:
        return f"head size {d}: {' or '.join(map(str, HEAD_SIZES))} only"
    if K.shape[-2] != n or n % 128:
        return f"{n} queries and {K.shape[-2]} keys: equal, and a multiple of 128"
    if not all(_addressable(x) for x in (Q, K, V)):
        return "a layout that one 2-D TMA descriptor cannot address"
    return ""


def forward(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor, L: torch.Tensor, is_causal: bool):
    """Write attention of (batch, heads, n, d) Q, K, V into O (any strides) and its logsumexp into
    L (batch, heads, n), contiguous. Call only where ``unsupported`` returns ''. One call's plan:
    repeated calls keep a ``Forward`` instead."""
    Q, K, V = tma_aligned(Q, K, V)
    Forward(Q, K, V, O, is_causal)(Q, K, V, O, L)


def _template(x: torch.Tensor, block: int):
    """_as_rows(x, block), its descriptor holding no tensor: what a plan keeps."""
    desc, *place = _as_rows(x, block)
    desc.base = None
    return desc, tuple(place)


class Forward:
    """The forward for one signature of (batch, heads, n, d) Q, K, V (shapes, strides, dtype; bases
    16-byte aligned) and O's strides: kernel, tiling and key splits chosen, descriptors laid out and
    launches bound once; a call only allocates the split results (if any) and launches.

    A call reads only the storage of its tensors, so (batch, n, d) tensors that were unsqueezed into
    one head can be passed as they are, and for O its merged (batch, n, heads x d) tensor.
    """

    def __init__(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor, is_causal: bool):
        batch, heads, n, d = Q.shape
        key_tile, stages = tiling(n, d)
        self.splits = key_splits(batch * heads * n // BLOCK_M, n // key_tile, _sm_count(Q.device))
        self.warp_specialized = warp_specialized(n, self.splits)
        if self.warp_specialized:
            key_tile = 2 * BLOCK_M
        templates = [_template(x, rows) for x, rows in ((Q, BLOCK_M), (K, key_tile), (V, key_tile))]
        descriptors = {i: desc for i, (desc, _) in enumerate(templates)}  # Q, K, V: the first three
        if self.warp_specialized:
            self.main = Launcher(
                _fwd_ws_kernel, (n // (2 * BLOCK_M), batch * heads), descriptors=descriptors,
                IS_CAUSAL=is_causal, STAGES=2, num_warps=NUM_WARPS, maxnreg=WS_LAUNCH_REGS,
            )  # fmt: skip
        else:
            self.main = Launcher(
                _fwd_kernel, (n // BLOCK_M * self.splits, batch * heads), descriptors=descriptors,
                IS_CAUSAL=is_causal, STAGES=stages, SPLITS=self.splits, num_warps=NUM_WARPS,
            )  # fmt: skip
        places = [i for _, place in templates for i in place]
        self.place = (n, heads, *places, *O.stride()[:3])
        self.scale_log2 = LOG2E / math.sqrt(d)
        if self.splits > 1:
            self.parts = ((self.splits, batch * heads, n, d), (self.splits, batch * heads, n))
            self.combine = Launcher(
                _combine, (n // BLOCK_M, batch * heads),
                BLOCK_N=key_tile, IS_CAUSAL=is_causal, SPLITS=self.splits, D=d, BLOCK_M=BLOCK_M, num_warps=4,
            )  # fmt: skip
            self.combine_place = (n, heads, *O.stride()[:3])

    def __call__(self, Q, K, V, O, L) -> None:
        if self.warp_specialized:
            self.main(Q, K, V, O, L, *self.place, self.scale_log2)
        elif self.splits == 1:
            self.main(Q, K, V, O, L, *self.place, O, O, self.scale_log2)  # no split results: O stands in
        else:
            O_part, L_part = L.new_empty(self.parts[0]), L.new_empty(self.parts[1])  # float32, as L
            self.main(Q, K, V, O, L, *self.place, O_part, L_part, self.scale_log2)
            self.combine(O_part, L_part, O, L, *self.combine_place)


def warp_specialized(n: int, splits: int) -> bool:
    """Whether rows of n keys take _fwd_ws_kernel: longer than SHORT and unsplit. At the leaderboard
    shape it was 5% faster than _fwd_kernel (4% ahead of cuDNN), at d = 128 and 8192 keys 23%
    (notes/flash-hopper.md, variant 18); the model's contexts were not measured with it."""
    return splits == 1 and n > SHORT


def key_splits(programs: int, longest: int, sms: int) -> int:
    """How many programs share each query tile's key tiles (split-KV, then _combine): doubled while
    the grid leaves SMs idle and each share keeps at least 4 key tiles of the longest row. At batch 1,
    seq 4096 the unsplit grid is 64 programs on 132 SMs, each walking up to 32 tiles in sequence."""
    splits = 1
    while programs * splits < sms and longest // (2 * splits) >= 4:
        splits *= 2
    return splits


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def compile_for_sm90(d: int, is_causal: bool, dtype=torch.bfloat16, splits: int = 1, n: int = 4096):
    """Compile the kernel that Forward would choose for an H100, on any machine (no GPU needed): the
    tests' check that it builds (n keys and the splits choose the kernel and its tiling)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    ws = warp_specialized(n, splits)
    fn, signature = (_fwd_ws_kernel if ws else _fwd_kernel), {}
    key_tile, stages = (2 * BLOCK_M, 2) if ws else tiling(n, d)
    for arg in fn.arg_names:
        if arg.endswith("_desc"):
            block = [BLOCK_M if arg == "q_desc" else key_tile, d]
            signature[arg] = f"tensordesc<{name}{block},{_shared_layout(tuple(block), GL_DTYPES[dtype])!r}>"
        else:
            pointers = {"O": f"*{name}", "L": "*fp32", "O_part": "*fp32", "L_part": "*fp32", "scale_log2": "fp32"}
            signature[arg] = pointers.get(arg, "i32")
    constexprs = {"IS_CAUSAL": is_causal, "STAGES": stages, "num_warps": NUM_WARPS} | ({} if ws else {"SPLITS": splits})
    for arg in constexprs:
        signature[arg] = "constexpr"
    source = GluonASTSource(fn, signature, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    options = {"num_warps": NUM_WARPS} | ({"maxnreg": WS_LAUNCH_REGS} if ws else {})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
