"""Can a GEMM of our own carry the SwiGLU in its epilogue at cuBLAS's energy? (notes/ladder-power.md)

Ran at: a24cbc319312 (H100 80GB HBM3, two runs, the first before the wide arm), outputs:
    notes/logs/2026-11-27-swiglu_gemm_bench-2.txt and -3.txt

The 2.7B step runs at the H100's 700 W cap, so its time is its energy over about 692 W. Of the work
between the products, SwiGLU's elementwise kernels are the largest part (7.6 ms a step), and they run
at the HBM bound already: only a GEMM that computes the SwiGLU in its epilogue can remove them, and
it must not spend more energy on the products than cuBLAS does. Inductor's own templates lost to
cuBLAS by 8-16% at these shapes, so this tries a GEMM written for Hopper in Gluon: persistent, TMA
loads into a ring of shared-memory stages, async wgmma, the next tiles' loads in flight during the
epilogue.

The forward of one SwiGLU input side, at the 2.7B shapes (4096 tokens, d_model 2560, d_ff 10240,
bf16), 32 layers a replay, each layer its own W1 and W3:

- ``torch``: G = x W1^T, U = x W3^T by cuBLAS, then H = G sigmoid(G) U compiled by inductor (what the
  top rung runs now; G and U stay for the backward);
- ``torch_gemms``: the two cuBLAS products alone;
- ``ours``: one Gluon kernel: each program multiplies one x tile by a W1 and a W3 tile, and its
  epilogue writes G, U and H;
- ``ours_gemms``: the same kernel writing G and U alone;
- ``ours_loop``: its loop alone, nothing written; ``ours_loop_wide``: the same loop with the W1 and W3
  tiles stacked, one wgmma of N = 256 a step where the others issue two of N = 128.

``ours_gemms`` against ``torch_gemms`` prices our products against cuBLAS's; ``ours`` against
``torch`` prices the whole lever. First each arm's outputs are checked against float64, then the
ring depth is chosen by time (do_bench), then the arms take turns, each held 3 s and timed about 4 s
with NVML's energy counter read around it.

    PYTHONPATH=src python notes/swiglu_gemm_bench.py 3
"""

import itertools
import sys

import torch
import triton
from held_energy import captured, in_turns
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K, NUM_WARPS = 128, 128, 64, 8


@gluon.jit
def _load(j, x_desc, w1_desc, w3_desc, x_s, w1_s, w3_s, ready, first, progs, tiles_m, k_steps, total):
    """The TMA loads of this program's j-th (tile, k) step into ring slot j % STAGES."""
    STAGES: gl.constexpr = x_s.type.shape[0]
    BM: gl.constexpr = x_desc.block_type.shape[0]
    BN: gl.constexpr = w1_desc.block_type.shape[0]
    BK: gl.constexpr = x_desc.block_type.shape[1]
    tile = first + (j // k_steps) * progs
    k = (j % k_steps) * BK
    slot = j % STAGES
    pred = j < total
    bar = ready.index(slot)
    mbarrier.expect(bar, x_desc.block_type.nbytes + 2 * w1_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(x_desc, [(tile % tiles_m) * BM, k], bar, x_s.index(slot), pred=pred)
    w1_dst, w3_dst = w1_s.index(slot), w3_s.index(slot)
    if w1_dst.type.shape[0] > BN:  # one stacked buffer (WIDE)
        w1_dst, w3_dst = w1_dst.slice(0, BN), w3_dst.slice(BN, BN)
    tma.async_copy_global_to_shared(w1_desc, [(tile // tiles_m) * BN, k], bar, w1_dst, pred=pred)
    tma.async_copy_global_to_shared(w3_desc, [(tile // tiles_m) * BN, k], bar, w3_dst, pred=pred)


@gluon.jit
def _store(desc, ptr, tile, out_s, row, col, TMA_STORES: gl.constexpr):
    if TMA_STORES:
        tma.store_wait(0)  # the previous store has read out_s
        out_s.store(tile)
        fence_async_shared()
        tma.async_copy_shared_to_global(desc, [row, col], out_s)
    else:
        BM: gl.constexpr = tile.type.shape[0]
        BN: gl.constexpr = tile.type.shape[1]
        rows = row + gl.arange(0, BM, layout=gl.SliceLayout(1, tile.type.layout))
        cols = col + gl.arange(0, BN, layout=gl.SliceLayout(0, tile.type.layout))
        gl.store(ptr + rows[:, None] * desc.shape[1] + cols[None, :], tile)


@gluon.jit
def swiglu_gemm_kernel(
    x_desc, w1_desc, w3_desc, g_desc, u_desc, h_desc, G, U, H,
    GATED: gl.constexpr, TMA_STORES: gl.constexpr, WRITE: gl.constexpr, WIDE: gl.constexpr, STAGES: gl.constexpr,
    num_warps: gl.constexpr,
):  # fmt: skip
    """G = x W1^T and U = x W3^T, one (BM, BN) tile of each a step, and H = G sigmoid(G) U where GATED.

    The epilogue stores through shared memory by TMA (TMA_STORES), or from the registers
    (gl.store); without WRITE it stores nothing, which prices the loop alone. WIDE (the loop alone only)
    stacks the W1 and W3 tiles in one buffer and multiplies x by both in one wgmma of N = 2 BN, one
    (BM, 2 BN) accumulator: x's tile read once a step where two products of N = BN read it twice."""
    BM: gl.constexpr = x_desc.block_type.shape[0]
    BK: gl.constexpr = x_desc.block_type.shape[1]
    BN: gl.constexpr = w1_desc.block_type.shape[0]
    dtype: gl.constexpr = x_desc.dtype
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16]
    )

    x_s = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], x_desc.layout)
    if WIDE:
        gl.static_assert(not WRITE)
        w_s = gl.allocate_shared_memory(dtype, [STAGES, 2 * BN, BK], w1_desc.layout)
        w1_s = w_s  # _load puts W1's tile in the first BN rows of each stage, W3's in the last
        w3_s = w_s
        wide: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, 2 * BN, 16]
        )
        acc = gl.zeros([BM, 2 * BN], gl.float32, wide)
    else:
        w1_s = gl.allocate_shared_memory(dtype, [STAGES, BN, BK], w1_desc.layout)
        w3_s = gl.allocate_shared_memory(dtype, [STAGES, BN, BK], w3_desc.layout)
    if TMA_STORES:
        out_s = gl.allocate_shared_memory(dtype, [BM, BN], g_desc.layout)
    else:
        out_s = x_s  # unused
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)

    tiles_m = gl.cdiv(x_desc.shape[0], BM)
    tiles = tiles_m * gl.cdiv(w1_desc.shape[0], BN)
    k_steps = gl.cdiv(x_desc.shape[1], BK)
    first = gl.program_id(0)
    progs = gl.num_programs(0)
    total = gl.cdiv(tiles - first, progs) * k_steps  # this program's (tile, k) steps, flattened

    for j in gl.static_range(STAGES - 1):
        _load(j, x_desc, w1_desc, w3_desc, x_s, w1_s, w3_s, ready, first, progs, tiles_m, k_steps, total)
    acc_g = gl.zeros([BM, BN], gl.float32, layout)
    acc_u = gl.zeros([BM, BN], gl.float32, layout)
    for j in range(total):
        slot = j % STAGES
        kk = j % k_steps
        mbarrier.wait(ready.index(slot), (j // STAGES) & 1)
        if WIDE:
            acc = warpgroup_mma(x_s.index(slot), w_s.index(slot).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc,))
        else:
            acc_g = warpgroup_mma(x_s.index(slot), w1_s.index(slot).permute((1, 0)), acc_g, is_async=True)
            acc_u = warpgroup_mma(x_s.index(slot), w3_s.index(slot).permute((1, 0)), acc_u, is_async=True)
            # step j - 1's products are done: its slot takes step j + STAGES - 1's loads
            acc_g, acc_u = warpgroup_mma_wait(2, deps=(acc_g, acc_u))
        _load(j + STAGES - 1, x_desc, w1_desc, w3_desc, x_s, w1_s, w3_s, ready, first, progs, tiles_m, k_steps, total)
        if kk == k_steps - 1:
            if WIDE:
                acc = warpgroup_mma_wait(0, deps=(acc,))
            else:
                acc_g, acc_u = warpgroup_mma_wait(0, deps=(acc_g, acc_u))
            tile = first + (j // k_steps) * progs
            row = (tile % tiles_m) * BM
            col = (tile // tiles_m) * BN
            if WRITE:
                _store(g_desc, G, acc_g.to(dtype), out_s, row, col, TMA_STORES)
                _store(u_desc, U, acc_u.to(dtype), out_s, row, col, TMA_STORES)
                if GATED:  # from G and U as rounded, as the compiled model computes it from the stored ones
                    gf = acc_g.to(dtype).to(gl.float32)
                    h = gf / (1.0 + gl.exp2(-1.4426950408889634 * gf)) * acc_u.to(dtype).to(gl.float32)
                    _store(h_desc, H, h.to(dtype), out_s, row, col, TMA_STORES)
            elif WIDE:  # one value that is never stored, so the products are not compiled away
                keep = gl.max(gl.max(acc, axis=1), axis=0)
                gl.store(H, keep.to(dtype), mask=keep > 3.0e38)
                acc = gl.zeros([BM, 2 * BN], gl.float32, wide)
            else:
                keep = gl.max(gl.max(acc_g + acc_u, axis=1), axis=0)
                gl.store(H, keep.to(dtype), mask=keep > 3.0e38)
            acc_g = gl.zeros([BM, BN], gl.float32, layout)
            acc_u = gl.zeros([BM, BN], gl.float32, layout)
    if TMA_STORES:
        tma.store_wait(0)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))


def _desc(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16))


def swiglu_gemm(x, w1, w3, g, u, h, gated, stages, tma_stores=True, write=True, wide=False) -> None:
    tiles = triton.cdiv(x.shape[0], BLOCK_M) * triton.cdiv(w1.shape[0], BLOCK_N)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    swiglu_gemm_kernel[(min(sms, tiles),)](
        _desc(x, [BLOCK_M, BLOCK_K]), _desc(w1, [BLOCK_N, BLOCK_K]), _desc(w3, [BLOCK_N, BLOCK_K]),
        _desc(g, [BLOCK_M, BLOCK_N]), _desc(u, [BLOCK_M, BLOCK_N]), _desc(h, [BLOCK_M, BLOCK_N]), g, u, h,
        GATED=gated, TMA_STORES=tma_stores, WRITE=write, WIDE=wide, STAGES=stages, num_warps=NUM_WARPS,
    )  # fmt: skip


def main(rounds: int) -> None:
    device = torch.device("cuda")
    tokens, d_model, d_ff, layers = 4096, 2560, 10240, 32
    torch.manual_seed(0)
    x = torch.randn(tokens, d_model, device=device, dtype=torch.bfloat16)
    std = (2 / (d_model + d_ff)) ** 0.5
    w1 = [torch.randn(d_ff, d_model, device=device, dtype=torch.bfloat16) * std for _ in range(layers)]
    w3 = [torch.randn(d_ff, d_model, device=device, dtype=torch.bfloat16) * std for _ in range(layers)]
    g, u, h = (torch.empty(tokens, d_ff, device=device, dtype=torch.bfloat16) for _ in range(3))
    gate = torch.compile(lambda g, u: g * torch.sigmoid(g) * u)

    def torch_layer(a, b, gated):
        torch.mm(x, a.t(), out=g)
        torch.mm(x, b.t(), out=u)
        if gated:
            h.copy_(gate(g, u)) if checking else gate(g, u)  # timed: inductor's one kernel, into the pool

    def torch_arm(gated):
        return lambda: [torch_layer(a, b, gated) for a, b in zip(w1, w3)]

    def ours_arm(gated, stages, tma_stores, write=True, wide=False):
        return lambda: [swiglu_gemm(x, a, b, g, u, h, gated, stages, tma_stores, write, wide) for a, b in zip(w1, w3)]

    # float64 references for layer 0, and each implementation's largest error against them
    gr, ur = x.double() @ w1[0].double().t(), x.double() @ w3[0].double().t()
    hr = gr * torch.sigmoid(gr) * ur
    checking = True
    checks = {"torch": lambda: torch_layer(w1[0], w3[0], True)}
    for stages, tma_stores in itertools.product((3, 4), (True, False)):
        name = f"ours ({stages} stages, {'TMA' if tma_stores else 'direct'} stores)"
        checks[name] = lambda s=stages, t=tma_stores: swiglu_gemm(x, w1[0], w3[0], g, u, h, True, s, t)
    for name, run in checks.items():
        g.zero_(), u.zero_(), h.zero_()
        run()
        torch.cuda.synchronize()
        errors = [((o.double() - r).abs().max() / r.abs().max()).item() for o, r in ((g, gr), (u, ur), (h, hr))]
        worst = ", ".join(f"{n} {e:.1e}" for n, e in zip("GUH", errors))
        print(f"# {name}: largest error / largest value against float64: {worst}", flush=True)
    checking = False

    # time alone (do_bench): our kernel's ring depth and epilogue, against cuBLAS
    flops = 2 * 2 * tokens * d_model * d_ff * layers
    best = {}

    def bench(label, fn):
        ms = triton.testing.do_bench(fn, rep=500)
        print(f"# do_bench {label}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TF/s", flush=True)
        return ms

    for gated, stages, tma_stores in itertools.product((False, True), (3, 4), (True, False)):
        ms = bench(f"ours gated={gated} stages={stages} tma_stores={tma_stores}", ours_arm(gated, stages, tma_stores))
        if gated not in best or ms < best[gated][2]:
            best[gated] = (stages, tma_stores, ms)
    for stages in (3, 4):
        bench(f"ours, the loop alone (nothing written), stages={stages}", ours_arm(False, stages, False, write=False))
        bench(
            f"ours, the loop alone, one N = 256 product, stages={stages}", ours_arm(False, stages, False, False, True)
        )
    for gated in (False, True):
        bench(f"torch gated={gated}", torch_arm(gated))

    arms = {
        "torch": captured(torch_arm(True)),
        "ours": captured(ours_arm(True, *best[True][:2])),
        "torch_gemms": captured(torch_arm(False)),
        "ours_gemms": captured(ours_arm(False, *best[False][:2])),
        "ours_loop": captured(ours_arm(False, 3, False, write=False)),
        "ours_loop_wide": captured(ours_arm(False, 3, False, write=False, wide=True)),
    }
    print(f"# {torch.cuda.get_device_name(device)}, {layers} layers a replay", flush=True)
    print(f"# ours (stages, TMA stores): gated {best[True][:2]}, not {best[False][:2]}", flush=True)
    print("round arm replays median_ms tflops j_per_replay", flush=True)
    in_turns(arms, device, rounds, 3.0, 4.0, flops)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
