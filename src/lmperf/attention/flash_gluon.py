"""The FlashAttention forward for Hopper (sm_90), in Gluon: the softmax of one key tile runs while the
tensor cores compute the previous tile's P V, as in FlashAttention-3.

Why Gluon: Triton's ``tl.dot`` waits for each wgmma as soon as it is issued, so the softmax and the
products take turns (notes/flash-hopper.md, variants 3 and 4). Here each step issues S_j = Q K_j^T
and O += P_{j-1} V_{j-1} asynchronously, waits for S_j alone, computes the online softmax of S_j
while the P V product runs, then waits for it and rescales O. Q stays in registers; K and V tiles
arrive by TMA into a ring of ``STAGES`` shared-memory buffers, each refilled once the product that
reads it has completed. One warpgroup per program (64 query rows), two programs per SM.

Same outputs as the portable kernel (``flash_triton``): O, and L the natural-log logsumexp, so its
backward takes over unchanged. Used where ``unsupported()`` has no objection: an sm_90 GPU, bf16 or
fp16, d of 64 or 128, as many keys as queries, a multiple of 128, and rows that a 2-D TMA
descriptor can address (the model's (batch, seq, heads, d) projections can).
"""

import functools
import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LOG2E = 1.4426950408889634
# 64 query rows (one warpgroup), and per head size the key tile that was fastest on an H100
# (notes/flash-hopper.md, variant 10): 128 keys at d = 64, 64 at d = 128 (fits two programs per SM)
BLOCK_M, STAGES, NUM_WARPS = 64, 2, 4
KEY_TILE = {64: 128, 128: 64}
DKDV_KEYS, DKDV_QUERIES = 128, 64  # the backward's keys per program (16 per warp), queries per step
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


@gluon.jit
def _load_tile(desc, row, col, bar, dst, pred):
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, col], bar, dst, pred=pred)


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
    scale_log2,
    IS_CAUSAL: gl.constexpr,
    STAGES: gl.constexpr,
    num_warps: gl.constexpr,
):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype

    q0 = (gl.num_programs(0) - 1 - gl.program_id(0)) * BLOCK_M  # heaviest causal tiles first
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, D, 16]
    )
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
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

    _load_tile(q_desc, q_row + q0, q_col, q_bar, q_smem, True)
    for i in gl.static_range(STAGES):
        _load_tile(k_desc, k_row + i * BLOCK_N, k_col, k_bars.index(i), k_smem.index(i), i < n_tiles)
        _load_tile(v_desc, v_row + i * BLOCK_N, v_col, v_bars.index(i), v_smem.index(i), i < n_tiles)

    q_rows = q0 + gl.arange(0, BLOCK_M, layout=row_s)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
    l = gl.zeros([BLOCK_M], gl.float32, row_s)

    # key tile 0: nothing to overlap with yet
    mbarrier.wait(q_bar, 0)
    q = q_smem.load(q_layout)  # in registers, each S = Q K^T reads only K from shared memory
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s,))
    _load_tile(k_desc, k_row + STAGES * BLOCK_N, k_col, k_bars.index(0), k_smem.index(0), STAGES < n_tiles)
    p, alpha, m, l = _softmax(s, m, l, q_rows, 0, scale_log2, BLOCK_N, IS_CAUSAL, s_layout)
    p = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n_tiles):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
        acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
        s = warpgroup_mma_wait(1, deps=(s,))  # S_j is done; P_{j-1} V_{j-1} may still run
        refill = j + STAGES < n_tiles
        _load_tile(k_desc, k_row + (j + STAGES) * BLOCK_N, k_col, k_bars.index(slot), k_smem.index(slot), refill)
        if j >= first_masked:
            p_new, alpha, m, l = _softmax(s, m, l, q_rows, j * BLOCK_N, scale_log2, BLOCK_N, True, s_layout)
        else:
            p_new, alpha, m, l = _softmax(s, m, l, q_rows, j * BLOCK_N, scale_log2, BLOCK_N, False, s_layout)
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        refill = j - 1 + STAGES < n_tiles
        _load_tile(v_desc, v_row + (j - 1 + STAGES) * BLOCK_N, v_col, v_bars.index(prev), v_smem.index(prev), refill)
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        p = gl.convert_layout(p_new.to(dtype), p_layout)

    last = (n_tiles - 1) % STAGES
    mbarrier.wait(v_bars.index(last), ((n_tiles - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))

    out = acc / gl.convert_layout(l, row_o)[:, None]
    rows = q0 + gl.arange(0, BLOCK_M, layout=row_o)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    O += (bh // H) * stride_ob + (bh % H) * stride_oh
    gl.store(O + rows[:, None] * stride_on + cols[None, :], out.to(dtype))
    gl.store(L + bh * N + q_rows, (m + gl.log2(l)) * 0.6931471805599453)  # log2 to natural log


@gluon.jit
def _load_step(q_desc, do_desc, q_row, q_col, do_row, do_col, q0, bar, q_dst, do_dst, nbytes, pred):
    """One backward step's Q and dO tiles, onto one barrier."""
    mbarrier.expect(bar, nbytes, pred=pred)
    tma.async_copy_global_to_shared(q_desc, [q_row + q0, q_col], bar, q_dst, pred=pred)
    tma.async_copy_global_to_shared(do_desc, [do_row + q0, do_col], bar, do_dst, pred=pred)


@gluon.jit
def _dkdv_kernel(
    q_desc,
    k_desc,
    v_desc,
    do_desc,
    dK,
    dV,
    L,
    Delta,
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
    do_rows_b,
    do_stride_h,
    do_row_len,
    stride_dkb,
    stride_dkh,
    stride_dkn,
    stride_dvb,
    stride_dvh,
    stride_dvn,
    scale,
    scale_log2,
    IS_CAUSAL: gl.constexpr,
    STAGES: gl.constexpr,
    num_warps: gl.constexpr,
):
    """dV = sum_q P^T dO and dK = scale sum_q dS^T Q for one key tile, over query tiles.

    Transposed, keys along rows, as the portable kernel: K and V sit in registers as the left
    operands of S^T = K Q^T and dP^T = V dO^T, and P^T and dS^T feed dV and dK from registers.
    Both score products are issued at once; P^T is computed while dP^T is still running.
    """
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]  # keys of this program
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]  # queries per step
    D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype

    k0 = gl.program_id(0) * BLOCK_N
    bh = gl.program_id(1)
    q_row, q_col = _origin(bh, H, q_rows_b, q_stride_h, q_row_len)
    k_row, k_col = _origin(bh, H, k_rows_b, k_stride_h, k_row_len)
    v_row, v_col = _origin(bh, H, v_rows_b, v_stride_h, v_row_len)
    do_row, do_col = _origin(bh, H, do_rows_b, do_stride_h, do_row_len)

    st_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_M, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, D, 16]
    )
    kv_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=st_layout, k_width=2)
    pt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    col: gl.constexpr = gl.SliceLayout(0, st_layout)

    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, D], v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, D], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, D], do_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)

    if IS_CAUSAL:
        q_start = k0  # earlier queries see none of these keys
        n_masked = BLOCK_N // BLOCK_M  # steps whose queries cross the diagonal
    else:
        q_start = 0
        n_masked = 0
    n_steps = (N - q_start) // BLOCK_M

    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [k_row + k0, k_col], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [v_row + k0, v_col], kv_bar, v_smem)
    step_bytes: gl.constexpr = q_desc.block_type.nbytes + do_desc.block_type.nbytes
    for i in gl.static_range(STAGES):
        _load_step(
            q_desc,
            do_desc,
            q_row,
            q_col,
            do_row,
            do_col,
            q_start + i * BLOCK_M,
            bars.index(i),
            q_smem.index(i),
            do_smem.index(i),
            step_bytes,
            i < n_steps,
        )
    mbarrier.wait(kv_bar, 0)
    k = k_smem.load(kv_layout)
    v = v_smem.load(kv_layout)

    keys = k0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    dk = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    dv = gl.zeros([BLOCK_N, D], gl.float32, acc_layout)
    for i in range(n_steps):
        slot = i % STAGES
        q0 = q_start + i * BLOCK_M
        mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
        st = warpgroup_mma(k, q_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v, do_smem.index(slot).permute((1, 0)), zero_st, use_acc=False, is_async=True)
        queries = q0 + gl.arange(0, BLOCK_M, layout=col)
        lse2 = gl.load(L + bh * N + queries) * 1.4426950408889634
        delta = gl.load(Delta + bh * N + queries)
        st = warpgroup_mma_wait(1, deps=(st,))  # S^T is done; dP^T may still run
        pt = gl.exp2(st * scale_log2 - lse2[None, :])
        if i < n_masked:
            pt = gl.where(queries[None, :] >= keys[:, None], pt, 0.0)
        dpt = warpgroup_mma_wait(0, deps=(dpt,))
        dst = pt * (dpt - delta[None, :])
        pt_op = gl.convert_layout(pt.to(dtype), pt_layout)
        dst_op = gl.convert_layout(dst.to(dtype), pt_layout)
        dv = warpgroup_mma(pt_op, do_smem.index(slot), dv, is_async=True)
        dk = warpgroup_mma(dst_op, q_smem.index(slot), dk, is_async=True)
        dv, dk, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, pt_op, dst_op))
        # this slot is free again: load the step STAGES ahead into it
        _load_step(
            q_desc,
            do_desc,
            q_row,
            q_col,
            do_row,
            do_col,
            q0 + STAGES * BLOCK_M,
            bars.index(slot),
            q_smem.index(slot),
            do_smem.index(slot),
            step_bytes,
            i + STAGES < n_steps,
        )

    mbarrier.invalidate(kv_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))
    rows = k0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    dK += (bh // H) * stride_dkb + (bh % H) * stride_dkh
    dV += (bh // H) * stride_dvb + (bh % H) * stride_dvh
    gl.store(dK + rows[:, None] * stride_dkn + cols[None, :], (dk * scale).to(dtype))
    gl.store(dV + rows[:, None] * stride_dvn + cols[None, :], dv.to(dtype))


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


def _addressable(x: torch.Tensor) -> bool:
    """Every head's (n, d) block is rows of one 2-D view: row stride stride(2), a head inside one row."""
    batch, heads, n, d = x.shape
    sb, sh, row_len, sd = x.stride()
    # 16-byte alignment (TMA): the caching allocator aligns storages, so the offset decides
    if sd != 1 or row_len < d or row_len % 8 or x.storage_offset() % 8 or sb % row_len:
        return False
    return sh % row_len == 0 or (heads - 1) * sh + d <= row_len


def unsupported(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> str:
    """Why the Gluon forward cannot take these (batch, heads, n, d) inputs ('' if it can)."""
    if Q.device.type != "cuda" or torch.cuda.get_device_capability(Q.device) != (9, 0):
        return "needs an sm_90 (Hopper) GPU"
    if Q.dtype not in GL_DTYPES:
        return f"dtype {Q.dtype}: bf16 or fp16 only"
    n, d = Q.shape[-2:]
    if d not in KEY_TILE:
        return f"head size {d}: {' or '.join(map(str, KEY_TILE))} only"
    if K.shape[-2] != n or n % 128:
        return f"{n} queries and {K.shape[-2]} keys: equal, and a multiple of 128"
    if not all(_addressable(x) for x in (Q, K, V)):
        return "a layout that one 2-D TMA descriptor cannot address"
    return ""


def unsupported_backward(Q, K, V, dO) -> str:
    """Why the Gluon dK/dV kernel cannot take these ('' if it can): the forward's conditions, d = 64,
    and an addressable dO."""
    reason = unsupported(Q, K, V)
    if reason or Q.shape[-1] != 64:
        return reason or f"head size {Q.shape[-1]}: the backward takes 64 only"
    return "" if _addressable(dO) else "a dO layout that one 2-D TMA descriptor cannot address"


@torch.library.custom_op("lmperf::gluon_attention_forward", mutates_args=("O", "L"))
def forward(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor, L: torch.Tensor, is_causal: bool
) -> None:
    """Write attention of (batch, heads, n, d) Q, K, V into O (any strides) and its logsumexp into
    L (batch, heads, n), contiguous. Call only where ``unsupported`` returns ''.

    A custom op, so that torch.compile calls it as it is rather than tracing the launch of a
    Gluon kernel and its host-side TMA descriptors."""
    batch, heads, n, d = Q.shape
    q, k, v = _as_rows(Q, BLOCK_M), _as_rows(K, KEY_TILE[d]), _as_rows(V, KEY_TILE[d])
    _fwd_kernel[(n // BLOCK_M, batch * heads)](
        q[0],
        k[0],
        v[0],
        O,
        L,
        n,
        heads,
        *q[1:],
        *k[1:],
        *v[1:],
        *O.stride()[:3],
        LOG2E / math.sqrt(d),
        IS_CAUSAL=is_causal,
        STAGES=STAGES,
        num_warps=NUM_WARPS,
    )


@torch.library.custom_op("lmperf::gluon_attention_dkdv", mutates_args=("dK", "dV"))
def backward_dkdv(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    dO: torch.Tensor,
    L: torch.Tensor,
    Delta: torch.Tensor,
    dK: torch.Tensor,
    dV: torch.Tensor,
    is_causal: bool,
) -> None:
    """dK and dV of (batch, heads, n, d) inputs, from L and Delta = rowsum(O * dO) (both (batch,
    heads, n), contiguous; Delta from the portable dQ pass). Where ``unsupported_backward`` is ''."""
    batch, heads, n, d = Q.shape
    descs = [_as_rows(x, DKDV_KEYS if x is K or x is V else DKDV_QUERIES) for x in (Q, K, V, dO)]
    _dkdv_kernel[(n // DKDV_KEYS, batch * heads)](
        *(desc for desc, *_ in descs),
        dK,
        dV,
        L,
        Delta,
        n,
        heads,
        *(number for _, *numbers in descs for number in numbers),
        *dK.stride()[:3],
        *dV.stride()[:3],
        1 / math.sqrt(d),
        LOG2E / math.sqrt(d),
        IS_CAUSAL=is_causal,
        STAGES=STAGES,
        num_warps=DKDV_KEYS // 16,
    )


def compile_for_sm90(d: int, is_causal: bool, backward: bool = False, dtype=torch.bfloat16):
    """Compile the forward (or the dK/dV kernel) for an H100 on any machine, no GPU needed: the
    tests' check that it builds."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    fn, signature = (_dkdv_kernel if backward else _fwd_kernel), {}
    types = {"O": f"*{name}", "dK": f"*{name}", "dV": f"*{name}", "L": "*fp32", "Delta": "*fp32"}
    for arg in fn.arg_names:
        if arg.endswith("_desc"):
            if backward:
                block = [DKDV_KEYS if arg in ("k_desc", "v_desc") else DKDV_QUERIES, d]
            else:
                block = [BLOCK_M if arg == "q_desc" else KEY_TILE[d], d]
            signature[arg] = f"tensordesc<{name}{block},{_shared_layout(tuple(block), GL_DTYPES[dtype])!r}>"
        else:
            signature[arg] = types.get(arg, "fp32" if arg.startswith("scale") else "i32")
    warps = DKDV_KEYS // 16 if backward else NUM_WARPS
    constexprs = {"IS_CAUSAL": is_causal, "STAGES": STAGES, "num_warps": warps}
    for arg in constexprs:
        signature[arg] = "constexpr"
    source = GluonASTSource(fn, signature, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
