"""Backward variants of hbwd.py against our kernel and SDPA cuDNN (do_bench medians).

Ran at: df15c42391aa (H100 80GB HBM3), output: variants 8 and 9 in notes/flash-hopper.md (not kept as a file)
Ran at: 152631d97a59 (H100 80GB HBM3, argument 500), output: variant 14 there

PYTHONPATH=src python notes/flash_hopper/bench_bwd.py 1000
"""

import itertools
import math
import sys

sys.path.insert(0, "notes/flash_hopper")
import hbwd
import torch
from common import sdpa, use_torch_allocator
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from lmperf.kernels.flash_attention import FlashAttentionTriton


def main() -> None:
    use_torch_allocator()
    REP = int(sys.argv[1]) if len(sys.argv) > 1 else 1000

    def grads_of(fn, q, k, v, do):
        q_, k_, v_ = (t.detach().clone().requires_grad_() for t in (q, k, v))
        fn(q_, k_, v_).backward(do)
        return q_.grad, k_.grad, v_.grad

    def h_backward(dkdv_cfg, dq_cfg=None, atomic=1):
        """Delta, then hdkdv and hdq; without dq_cfg, hdkdv alone with dQ accumulated in fp32: element
        atomics (atomic=1) or one TMA reduce-add per tile (atomic=2)."""

        def run(q, k, v, o, L, do):
            B, N, D = q.shape
            scale = 1 / math.sqrt(D)
            delta = (o.float() * do.float()).sum(-1)  # the variants share this row term
            dk, dv = torch.empty_like(k), torch.empty_like(v)
            acc = None if dq_cfg else torch.zeros(B, N, D, device="cuda", dtype=torch.float32)
            args = (B, N, scale, scale * 1.4426950408889634)
            bq, bk, w, s = dkdv_cfg
            hbwd.hdkdv[(N // bk, B)](
                q, k, v, do, L, delta, dk, dv, acc, *args, D=D, BLOCK_Q=bq, BLOCK_K=bk, ATOMIC_DQ=atomic if acc is not None else 0,
                num_warps=w, num_stages=s,
            )  # fmt: skip
            if acc is not None:
                return (acc * scale).to(q.dtype), dk, dv
            dq = torch.empty_like(q)
            bq, bk, w, s = dq_cfg
            hbwd.hdq[(N // bq, B)](
                q, k, v, do, L, delta, dq, *args, D=D, BLOCK_Q=bq, BLOCK_K=bk, num_warps=w, num_stages=s
            )  # fmt: skip
            return dq, dk, dv

        return run

    for B, N, D in [(16, 16384, 64), (128, 1024, 64)]:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = torch.randn(4, B, N, D, device="cuda", dtype=torch.bfloat16, generator=g).unbind(0)
        q, k, v, do = (t.contiguous() for t in (q, k, v, do))
        fwd_flops = 4 * B * N * N * D / 2
        ref = grads_of(sdpa(SDPBackend.FLASH_ATTENTION), q, k, v, do)
        # anchors: backward of one graph, re-run
        for name, fn in [
            ("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
            ("ours", lambda q, k, v: FlashAttentionTriton.apply(q, k, v, True)),
        ]:
            q_, k_, v_ = (t.detach().clone().requires_grad_() for t in (q, k, v))
            out = fn(q_, k_, v_)
            ms = do_bench(
                lambda: out.backward(do, retain_graph=True),
                warmup=100,
                rep=REP,
                grad_to_none=[q_, k_, v_],
                return_mode="median",
            )
            print(f"B{B} N{N} {name:>40} bwd {ms:8.4f} ms {2.5 * fwd_flops / ms / 1e9:6.1f} TF/s", flush=True)
        # ours' forward gives O and L
        O = torch.empty_like(q)
        L = torch.empty(B, N, device="cuda", dtype=torch.float32)
        q_, k_, v_ = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out = FlashAttentionTriton.apply(q_, k_, v_, True)
        L = out.grad_fn.saved_tensors[0]
        O = out.detach()
        atomic_cfgs = [
            (64, 128, 8, 2),
            (64, 64, 4, 3),
            (64, 64, 4, 2),
            (32, 64, 4, 3),
            (32, 128, 4, 2),
            (64, 128, 8, 3),
        ]
        for atomic, cfg in itertools.product((2, 1), atomic_cfgs):
            run = h_backward(cfg, atomic=atomic)
            label = ("tma_reduce" if atomic == 2 else "atomic") + str(cfg)
            try:
                got = run(q, k, v, O, L, do)
                err = max(((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(got, ref))
                ms = do_bench(lambda: run(q, k, v, O, L, do), warmup=100, rep=REP, return_mode="median")
                print(
                    f"B{B} N{N} {label:>40} bwd {ms:8.4f} ms {2.5 * fwd_flops / ms / 1e9:6.1f} TF/s err {err:.1e}",
                    flush=True,
                )
            except Exception as e:
                print(f"B{B} N{N} {label:>40} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
        best = None
        for dkdv_cfg, dq_cfg in itertools.product([(64, 64, 4, 2), (64, 64, 4, 3)], [(128, 64, 8, 3)]):
            run = h_backward(dkdv_cfg, dq_cfg)
            try:
                got = run(q, k, v, O, L, do)
                err = max(((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(got, ref))
                ms = do_bench(lambda: run(q, k, v, O, L, do), warmup=100, rep=REP, return_mode="median")
                print(
                    f"B{B} N{N} {'h dkdv' + str(dkdv_cfg) + ' dq' + str(dq_cfg):>40} bwd {ms:8.4f} ms {2.5 * fwd_flops / ms / 1e9:6.1f} TF/s err {err:.1e}",
                    flush=True,
                )
                if best is None or ms < best[0]:
                    best = (ms, run)
            except Exception as e:
                print(
                    f"B{B} N{N} {str(dkdv_cfg) + str(dq_cfg):>40} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True
                )


if __name__ == "__main__":
    main()
