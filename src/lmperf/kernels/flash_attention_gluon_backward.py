"""The FlashAttention backward for Hopper (sm_90), in Gluon: one warp-specialized kernel of five
products, whose dQ shares the TMA unit adds up in global memory. Head sizes 64 and 128.

Each program holds 128 keys fixed, K and V, 64 keys to each of two consumer warpgroups, and a loader
warp streams the query tiles (Q, dO) by TMA, as the forward's ``_fwd_ws_kernel``, with each tile's
logsumexp and Delta. Per query tile, with keys along rows as in the portable kernel, a consumer
computes S^T = K Q^T and dP^T = V dO^T, then P^T, dS^T = P^T (dP^T - Delta), dV += P^T dO and
dK += dS^T Q, and writes dS^T to shared memory. The warpgroups take turns with the tile's dQ = dS K:
one multiplies both warpgroups' dS^T by their K tiles, and has the sum added to an fp32 dQ in global
memory by a TMA bulk reduction (``cp.reduce.async.bulk.tensor.add``), which runs while the consumers
go on. Turns, rather than a share each summed in shared memory (variant 20), keep fp32 partial tiles
out of shared memory: 32 KB of shared-memory traffic a step instead of 64 (notes/flash-hopper.md,
variant 21).

At d = 128 a consumer's dK and dV take 128 registers a thread of its 240, so the rest must be few
(notes/flash-hopper.md, variant 23): K and V stay in shared memory, where wgmma reads them, instead
of registers; dQ is computed and reduced 64 columns at a time; and the logsumexp and Delta of a
query tile come through shared memory, staged by the loader, rather than as 16 registers each held
across the step. That last change made the d = 64 backward 6% faster too.

Why: the portable backward (``flash_attention``) is deterministic at the cost of seven products, two
of them recomputed in a separate dQ kernel. FlashAttention-3 and cuDNN do five, adding dQ with
atomics. Element atomics (``gl.atomic_add``) made this kernel slower than the two deterministic
ones together (notes/flash-hopper.md, variant 19); the bulk reduction is what FlashAttention-3 uses
instead (variant 20).
The price is the order of the fp32 additions, which varies between runs: under
``torch.use_deterministic_algorithms(True)``, ``unsupported`` sends the backward to the portable
kernels.
"""

import math

import torch
import triton
import triton.language as tl
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from lmperf.kernels import flash_attention_gluon
from lmperf.kernels.flash_attention_gluon import (
    LOG2E,
    WS_CONSUMER_REGS,
    WS_LAUNCH_REGS,
    WS_LOADER_REGS,
    _origin,
    _shared_layout,
    _template,
    left_operand,
    mma_layout,
    tma_aligned,
)
from lmperf.kernels.triton_launcher import Launcher

ROWS = 64  # keys of each consumer warpgroup, and queries of each streamed tile
DQ_COLS = 64  # columns of dQ a product and a bulk reduction take at a time (at most)
STAGES = gl.constexpr(2)  # ring slots of the streamed pair


@builtin
def _reduce_add(tensor_desc, coord, src, _semantic=None):
    """global[the box at coord] += shared ``src``, by the TMA unit (``cp.reduce.async.bulk.tensor``),
    tracked as a TMA store (``tma.store_wait``). Triton 3.6 has the op (``ttng.async_tma_reduce``)
    and its Gluon builder call, but no Gluon function for it on Hopper."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


@gluon.jit
def _loader(fixed, stream, bars, out, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """The loader warp: the program's K and V (two tiles each, one per consumer) once, then Q and dO
    tile by tile into a ring of STAGES slots, a slot refilled once both consumers have released it.
    With each tile go its queries' log2-scaled logsumexp and Delta, so that the consumers read them
    from shared memory when they need them instead of holding them in registers: at d = 128 those
    would spill. (WG and IS_CAUSAL are unused: the partitions share one signature.)"""
    k_desc, k_row, k_col, v_desc, v_row, v_col, k_smem, v_smem, k0 = fixed
    q_desc, q_row, q_col, do_desc, do_row, do_col, q_smem, do_smem, q_start, n_steps, row_smem = stream
    L, Delta, N, bh = out[2], out[3], out[4], out[5]
    fixed_bar, ready, empty = bars
    FIXED_ROWS: gl.constexpr = k_desc.block_type.shape[0]
    STEP: gl.constexpr = q_desc.block_type.shape[0]
    N_STAGES: gl.constexpr = q_smem.type.shape[0]
    mbarrier.expect(fixed_bar, 2 * (k_desc.block_type.nbytes + v_desc.block_type.nbytes))
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [k_row + k0 + w * FIXED_ROWS, k_col], fixed_bar, k_smem.index(w))
        tma.async_copy_global_to_shared(v_desc, [v_row + k0 + w * FIXED_ROWS, v_col], fixed_bar, v_smem.index(w))
    for i in range(n_steps):
        slot = i % N_STAGES
        mbarrier.wait(empty.index(slot), ((i // N_STAGES) & 1) ^ 1)  # starts as if phase 1 had completed
        mbarrier.expect(ready.index(slot), q_desc.block_type.nbytes + do_desc.block_type.nbytes)
        row = q_start + i * STEP
        tma.async_copy_global_to_shared(q_desc, [q_row + row, q_col], ready.index(slot), q_smem.index(slot))
        tma.async_copy_global_to_shared(do_desc, [do_row + row, do_col], ready.index(slot), do_smem.index(slot))
        queries = bh * N + row + gl.arange(0, STEP, layout=gl.BlockedLayout([STEP // 32], [32], [1], [0]))
        row_smem.index(2 * slot).store(gl.load(L + queries) * 1.4426950408889634)  # log2(e)
        row_smem.index(2 * slot + 1).store(gl.load(Delta + queries))
        mbarrier.arrive(ready.index(slot), count=1)  # the second arrival: the rows are stored


@gluon.jit
def _consumer(fixed, stream, bars, out, WG: gl.constexpr, IS_CAUSAL: gl.constexpr):
    """dK and dV of keys [k0 + 64 WG, k0 + 64 WG + 64), and every other query tile's dQ.
    K and V are the left operands of S^T = K Q^T and dP^T = V dO^T (in registers at d = 64, in
    shared memory at 128); P^T and dS^T feed dV and dK from registers, and dS^T goes through shared
    memory to dQ = dS K, which the warpgroup whose turn it is computes over both warpgroups' keys.
    ds_smem holds a dS^T tile per (turn, warpgroup); ds_ready says the other warpgroup's is written,
    ds_free that it was read."""
    k_desc, k_row, k_col, v_desc, v_row, v_col, k_smem, v_smem, k0 = fixed
    q_desc, q_row, q_col, do_desc, do_row, do_col, q_smem, do_smem, q_start, n_steps, row_smem = stream
    fixed_bar, ready, empty = bars
    dK, dV, L, Delta, N, bh, stride_dk, stride_dv, scale, scale_log2, dq_desc, ds_smem, dq_smem, ds_ready, ds_free = out
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]  # keys of this warpgroup
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]  # queries a step
    D: gl.constexpr = q_desc.block_type.shape[1]
    N_STAGES: gl.constexpr = q_smem.type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    st_layout: gl.constexpr = mma_layout(BLOCK_M)
    acc_layout: gl.constexpr = mma_layout(D)
    DQ_COLS: gl.constexpr = dq_desc.block_type.shape[1]
    DQ_PARTS: gl.constexpr = D // DQ_COLS  # a dQ tile's column parts, each its own product and reduction
    dq_layout: gl.constexpr = mma_layout(DQ_COLS)
    kv_layout: gl.constexpr = left_operand(st_layout)
    pt_layout: gl.constexpr = left_operand(acc_layout)
    col: gl.constexpr = gl.SliceLayout(0, st_layout)

    keys0 = k0 + WG * BLOCK_N
    keys = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
    # causal: the first steps' queries cross the diagonal of the program's 2 x BLOCK_N keys
    n_masked: gl.constexpr = 2 * BLOCK_N // BLOCK_M if IS_CAUSAL else 0
    mbarrier.wait(fixed_bar, 0)
    if D <= 64:  # K and V as register operands; at d = 128 registers hold dK, dV and dQ instead
        k = k_smem.index(WG).load(kv_layout)
        v = v_smem.index(WG).load(kv_layout)
    else:
        k = k_smem.index(WG)
        v = v_smem.index(WG)

    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    dk = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    dv = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    for i in range(n_steps):
        slot = i % N_STAGES
        turn = i % 2  # the warpgroup that computes this step's dQ tile, over both warpgroups' keys
        q0 = q_start + i * BLOCK_M
        mbarrier.wait(ready.index(slot), (i // N_STAGES) & 1)
        st = warpgroup_mma(k, q_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v, do_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(1, deps=(st,))  # S^T is done; dP^T may still run
        pt = gl.exp2(st * scale_log2 - row_smem.index(2 * slot).load(col)[None, :])
        if i < n_masked:
            queries = q0 + gl.arange(0, BLOCK_M, layout=col)
            pt = gl.where(queries[None, :] >= keys[:, None], pt, 0.0)
        delta = row_smem.index(2 * slot + 1).load(col)
        dpt = warpgroup_mma_wait(0, deps=(dpt,))
        pt_op = gl.convert_layout(pt.to(dtype), pt_layout)
        dst_op = gl.convert_layout((pt * (dpt - delta[None, :])).to(dtype), pt_layout)
        if turn != WG:  # the other warpgroup's dQ product two steps back has read this slot
            mbarrier.wait(ds_free.index(turn), ((i // 2) & 1) ^ 1)  # starts as if phase 1 had completed
        ds_smem.index(2 * turn + WG).store(dst_op)  # dS^T, which the dQ product reads transposed
        fence_async_shared()
        if turn != WG:
            mbarrier.arrive(ds_ready.index(turn), count=1)
        dv = warpgroup_mma(pt_op, do_smem.index(slot), dv, is_async=True)
        dk = warpgroup_mma(dst_op, q_smem.index(slot), dk, is_async=True)
        if D > 64:  # registers hold dK, dV and then dQ, no longer P^T and dS^T
            dv, dk, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, pt_op, dst_op))
        if turn == WG:  # dQ = dS K over the program's 128 keys, then added to global dQ by the TMA unit
            mbarrier.wait(ds_ready.index(turn), (i // 2) & 1)
            for h in gl.static_range(DQ_PARTS):  # dQ's columns a part at a time: fewer registers
                dq = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, dq_layout)
                for w in gl.static_range(2):  # each warpgroup's keys: its dS^T tile, its K tile
                    k_w = k_smem.index(w)
                    if DQ_COLS < D:
                        k_w = k_w.slice(h * DQ_COLS, DQ_COLS, dim=1)
                    dst_w = ds_smem.index(2 * turn + w)
                    dq = warpgroup_mma(dst_w.permute((1, 0)), k_w, dq, use_acc=w > 0, is_async=True)
                dq = warpgroup_mma_wait(0, deps=(dq,))
                if h == DQ_PARTS - 1:  # both dS^T tiles read
                    mbarrier.arrive(ds_free.index(turn), count=1)
                if h == 0:
                    tma.store_wait(0)  # this warpgroup's reductions two steps back have read its stages
                dq_smem.index(WG * DQ_PARTS + h).store(dq * scale)
                fence_async_shared()
                _reduce_add(dq_desc, [bh * N + q0, h * DQ_COLS], dq_smem.index(WG * DQ_PARTS + h))
        if D <= 64:
            dv, dk, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, pt_op, dst_op))
        mbarrier.arrive(empty.index(slot), count=1)

    rows = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    gl.store(dK + rows[:, None] * stride_dk + cols[None, :], (dk * scale).to(dtype))
    gl.store(dV + rows[:, None] * stride_dv + cols[None, :], dv.to(dtype))
    tma.store_wait(0)  # dq_smem lives as long as the program


@triton.jit
def _delta_kernel(
    O, dO, Delta, dQ_acc, N, H, so_b, so_h, so_n, sdo_b, sdo_h, sdo_n, D: tl.constexpr, BLOCK: tl.constexpr
):
    """Delta = rowsum(O dO) of BLOCK rows of one head, in fp32: the term of dS that the backward
    kernel reads for every query tile. It also zeroes those rows of dQ_acc, which the backward's
    bulk reductions add to."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    bh = tl.program_id(1)
    cols = tl.arange(0, D)
    o = tl.load(O + (bh // H) * so_b + (bh % H) * so_h + rows[:, None] * so_n + cols[None, :])
    do = tl.load(dO + (bh // H) * sdo_b + (bh % H) * sdo_h + rows[:, None] * sdo_n + cols[None, :])
    tl.store(Delta + bh * N + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1))
    tl.store(dQ_acc + (bh * N + rows)[:, None] * D + cols[None, :], tl.zeros([BLOCK, D], tl.float32))


@gluon.jit
def _bwd_kernel(
    q_desc, k_desc, v_desc, do_desc, dq_desc, dK, dV, L, Delta, N, H,
    q_rows_b, q_stride_h, q_row_len, k_rows_b, k_stride_h, k_row_len,
    v_rows_b, v_stride_h, v_row_len, do_rows_b, do_stride_h, do_row_len,
    stride_dkb, stride_dkh, stride_dkn, stride_dvb, stride_dvh, stride_dvn, scale, scale_log2,
    IS_CAUSAL: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """dK and dV of 128 keys, and their shares of dQ: K and V fixed, Q and dO streamed. Causal, the
    first key tiles see the most queries, so the grid's order is already heaviest first."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    k0 = gl.program_id(0) * 2 * BLOCK_N
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)
    do_row, do_col = _origin(bh, H, do_rows_b, do_stride_h, do_row_len)
    q_start = k0 if IS_CAUSAL else 0  # earlier queries see none of these keys
    n_steps = (N - q_start) // BLOCK_M
    dK += (bh // H) * stride_dkb + (bh % H) * stride_dkh
    dV += (bh // H) * stride_dvb + (bh % H) * stride_dvh

    k_smem = gl.allocate_shared_memory(dtype, [2] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2] + v_desc.block_type.shape, v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES] + q_desc.block_type.shape, q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES] + do_desc.block_type.shape, do_desc.layout)
    ds_smem = gl.allocate_shared_memory(dtype, [4, BLOCK_N, BLOCK_M], q_desc.layout)  # [turn, WG]
    dq_parts: gl.constexpr = 2 * D // dq_desc.block_type.shape[1]  # [WG, part of dQ's columns]
    dq_smem = gl.allocate_shared_memory(gl.float32, [dq_parts] + dq_desc.block_type.shape, dq_desc.layout)
    row_smem = gl.allocate_shared_memory(gl.float32, [2 * STAGES, BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    fixed_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(fixed_bar, count=1)
    for i in gl.static_range(2):
        mbarrier.init(ds_ready.index(i), count=1)
        mbarrier.init(ds_free.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=2)  # the loader's expect (then the TMA's bytes), and its rows
        mbarrier.init(empty.index(i), count=2)  # released by both consumer warpgroups

    fixed = (k_desc, k_row, k_col, v_desc, v_row, v_col, k_smem, v_smem, k0)
    stream = (q_desc, q_row, q_col, do_desc, do_row, do_col, q_smem, do_smem, q_start, n_steps, row_smem)
    bars = (fixed_bar, ready, empty)
    out = (dK, dV, L, Delta, N, bh, stride_dkn, stride_dvn, scale, scale_log2,
           dq_desc, ds_smem, dq_smem, ds_ready, ds_free)  # fmt: skip
    gl.warp_specialize(
        [
            (_consumer, (fixed, stream, bars, out, 0, IS_CAUSAL)),
            (_consumer, (fixed, stream, bars, out, 1, IS_CAUSAL)),
            (_loader, (fixed, stream, bars, out, 1, IS_CAUSAL)),
        ],
        [4, 1],
        [WS_CONSUMER_REGS, WS_LOADER_REGS],
    )


def unsupported(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, dO: torch.Tensor, capability: tuple[int, int] | None = None
) -> str:
    """Why this backward does not take these (batch, heads, n, d) inputs ('' if it does) on a GPU of
    this compute capability (by default Q's GPU's): the Gluon forward's conditions, d = 64 or 128, a size
    where it pays (``pays``), a dO one descriptor addresses, and no demand for deterministic
    algorithms."""
    why = flash_attention_gluon.unsupported(Q, K, V, capability)
    batch, heads, n, d = Q.shape
    programs = n // (2 * ROWS) * batch * heads
    if not why and d not in MIN_KEYS:
        why = f"head size {d}: {' and '.join(map(str, MIN_KEYS))} only"
    if not why and not pays(n, programs, d):
        why = f"{n} keys in {programs} programs: the portable kernels are faster there"
    if not why and not flash_attention_gluon._addressable(dO):
        why = "a dO layout that one 2-D TMA descriptor cannot address"
    if not why and torch.are_deterministic_algorithms_enabled():
        why = "deterministic algorithms demanded: dQ's fp32 additions come in no fixed order"
    return why


MIN_KEYS = {64: 4096, 128: 2048}  # by head size
MIN_PROGRAMS = {64: 128, 128: 256}  # d = 64: about one a SM of an H100 (132); d = 128: two (H200 A/B)


def pays(n: int, programs: int, d: int) -> bool:
    """Whether rows of n keys of head size d, in a grid of this many programs (128 keys each), are
    faster here than in the portable kernels. Forward + backward, replayed graphs:

    - d = 64, on an H100 after variant 21 (notes/flash-hopper.md): 6-12% faster from 4096 keys where
      the grid has 128 programs or more (1 x 4 x 4096, 4 x 16 x 4096, 1 x 2 x 8192, 1 x 1 x 16384);
      7% slower at 1 x 1 x 8192, whose 64 programs leave half the SMs idle where the portable
      kernels' smaller tiles do not; 3-8% slower at 2048 keys and below (4 x 16 x 2048, the model's
      4 x 20 x 1024), where each program walks few query tiles.
    - d = 128, on an H200 (notes/flash_hopper/ab_d128.py): 8-28% faster from 2048 keys in 256
      programs or more (4 x 16 x 2048, 4 x 16 x 4096, 8 x 1 x 16384, 1 x 1 x 32768 and 65536);
      3% slower at 4 x 16 x 1024, 17-20% slower at batch 1 up to 16384 keys (at most 128 programs).
    """
    if d not in MIN_KEYS:
        raise ValueError(f"head size {d}: the five-product backward takes {sorted(MIN_KEYS)}")
    return n >= MIN_KEYS[d] and programs >= MIN_PROGRAMS[d]


def _dq_box(d: int) -> tuple[int, int]:
    """The fp32 dQ tile one bulk reduction adds: ROWS queries by at most DQ_COLS of d columns."""
    return ROWS, min(d, DQ_COLS)


def backward(Q, K, V, O, dO, L, dQ, dK, dV, is_causal: bool) -> None:
    """Write the gradients of attention of (batch, heads, n, d) Q, K, V into dQ, dK, dV (any strides)
    from its output O, logsumexp L (batch, heads, n, contiguous) and dO. Call only where
    ``unsupported`` returns ''. One call's plan: repeated calls keep a ``Backward`` instead."""
    Q, K, V, dO = tma_aligned(Q, K, V, dO)
    Backward(Q, K, V, O, dO, L, dQ, dK, dV, is_causal)(Q, K, V, O, dO, L, dQ, dK, dV)


class Backward:
    """The backward for one signature of (batch, heads, n, d) Q, K, V, dO (shapes, strides, dtype;
    bases 16-byte aligned) and the strides of O, dK and dV: descriptors laid out and launches bound
    once. A call allocates Delta and the fp32 dQ, and launches three kernels: Delta (which also
    zeroes that dQ), the five products, and dQ's conversion to dQ's dtype and strides.

    As with ``flash_attention_gluon.Forward``, a call reads only the storage of its tensors: (batch, n, d)
    tensors unsqueezed into one head, and O's merged tensor, can be passed as they are.
    """

    def __init__(self, Q, K, V, O, dO, L, dQ, dK, dV, is_causal: bool):
        batch, heads, n, d = Q.shape
        self.delta = Launcher(_delta_kernel, (n // ROWS, batch * heads), D=d, BLOCK=ROWS)
        self.delta_place = (n, heads, *O.stride()[:3], *dO.stride()[:3])
        self.dq_shape = (batch * heads * n, d)
        box = _dq_box(d)
        dq_desc = TensorDescriptor(
            L.new_empty(self.dq_shape), list(self.dq_shape), [d, 1], list(box), _shared_layout(box, gl.float32)
        )
        dq_desc.base = None
        templates = [_template(x, ROWS) for x in (Q, K, V, dO)]
        places = [i for _, place in templates for i in place]
        scales = (1 / math.sqrt(d), LOG2E / math.sqrt(d))
        self.place = (n, heads, *places, *dK.stride()[:3], *dV.stride()[:3], *scales)
        descriptors = dict(enumerate([desc for desc, _ in templates] + [dq_desc]))  # Q, K, V, dO, dQ's sums
        self.main = Launcher(
            _bwd_kernel, (n // (2 * ROWS), batch * heads), descriptors=descriptors,
            IS_CAUSAL=is_causal, num_warps=4, maxnreg=WS_LAUNCH_REGS,
        )  # fmt: skip

    def __call__(self, Q, K, V, O, dO, L, dQ, dK, dV) -> None:
        delta = torch.empty_like(L)
        dq_acc = L.new_empty(self.dq_shape)  # float32, as L; zeroed with Delta
        self.delta(O, dO, delta, dq_acc, *self.delta_place)
        self.main(Q, K, V, dO, dq_acc, dK, dV, L, delta, *self.place)
        dQ.copy_(dq_acc.view(dQ.shape))


def compile_for_sm90(is_causal: bool, d: int = 64):
    """Compile _bwd_kernel for an H100 on any machine (no GPU needed): the tests' check that it
    builds, and that its dQ goes through the TMA unit's bulk reduction."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    fn, signature = _bwd_kernel, {}
    scalars = {"dK": "*bf16", "dV": "*bf16", "L": "*fp32", "Delta": "*fp32", "scale": "fp32", "scale_log2": "fp32"}
    for arg in fn.arg_names:
        if arg == "dq_desc":
            box = _dq_box(d)
            signature[arg] = f"tensordesc<fp32[{box[0]}, {box[1]}],{_shared_layout(box, gl.float32)!r}>"
        elif arg.endswith("_desc"):
            signature[arg] = f"tensordesc<bf16[{ROWS}, {d}],{_shared_layout((ROWS, d), gl.bfloat16)!r}>"
        else:
            signature[arg] = scalars.get(arg, "i32")
    constexprs = {"IS_CAUSAL": is_causal, "num_warps": 4}
    signature |= dict.fromkeys(constexprs, "constexpr")
    source = GluonASTSource(fn, signature, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": WS_LAUNCH_REGS})
