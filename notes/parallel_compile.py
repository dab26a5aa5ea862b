"""How long is our FlashAttention's first call, with the autotuner's configs compiled one after another
(as Triton does) and side by side in threads (``lmperf.kernels.triton_launcher.compile_configs``)?

A first call compiles every config of each autotuned kernel it runs (bf16: 4 forward, 18 dK/dV and 6
dQ configs; fp32: 4 each), then times them and keeps the fastest. The flash sweep's jobs spent 8-64 s
(bf16: 16-36 s) in their first backward, and every e2e and ladder job that runs our attention pays it once per head
size. For each case, this script runs two fresh processes, one each way, in alternating order, each
with an empty Triton cache of its own: the first forward + backward (compile, autotune, run), a
second one (warm: one launched call, not a measurement), the configs the autotuner picked and the
errors of the output and dQ against float64. Batch 4, 16 heads (the medium model's), causal.

    python notes/parallel_compile.py [--cases bf16:64:1024,bf16:80:1024,fp32:128:1024]

Ran at: 7ae2b01 (2 x NVIDIA H200, GPU 0), output: logs/2026-11-30-parallel_compile-7ae2b01-h200x2.txt (run 2)
Ran at: e1b5572 before the gradients were cleared between the calls (2 x NVIDIA H200, GPU 0), output: the same
file (run 1)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(dtype_name: str, d: int, seq: int, serial: bool) -> dict:
    """One first call and one warm call in this process; the caller gave it an empty Triton cache."""
    import torch

    from lmperf.kernels import flash_attention, triton_launcher
    from lmperf.kernels.flash_attention import FlashAttentionTriton

    if serial:  # Triton's own order: the autotuner compiles each config as it first times it
        triton_launcher.compile_configs = lambda *args, **kwargs: None
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    g = torch.Generator(device="cuda").manual_seed(d)
    q, k, v = (torch.randn(4, 16, seq, d, device="cuda", dtype=dtype, generator=g).requires_grad_() for _ in range(3))
    grad = torch.randn(4, 16, seq, d, device="cuda", dtype=dtype, generator=g)
    times = []
    for _ in range(2):
        q.grad = k.grad = v.grad = None
        torch.cuda.synchronize()
        begin = time.perf_counter()
        out = FlashAttentionTriton.apply(q, k, v, True)
        out.backward(grad)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = (q64 @ k64.transpose(-1, -2)) / d**0.5
    s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ v64
    ref.backward(grad.double())
    errors = [((x.double() - r).norm() / r.norm()).item() for x, r in ((out, ref), (q.grad, q64.grad))]
    picks = {}
    for name, kernel in zip(("forward", "dkdv", "dq"), flash_attention.KERNELS[dtype]):
        if getattr(kernel, "best_config", None) is not None and kernel.cache:
            picks[name] = str(kernel.best_config)
    return {
        "dtype": dtype_name,
        "d": d,
        "seq": seq,
        "compile": "serial" if serial else "threads",
        "first_s": round(times[0], 2),
        "warm_ms": round(1e3 * times[1], 3),
        "out_error": errors[0],
        "dq_error": errors[1],
        "kernels": {p: plan.kernel for p, plan in flash_attention.RAN.items()},
        "picks": picks,
        "cpus": len(os.sched_getaffinity(0)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="bf16:64:1024,bf16:80:1024,fp32:128:1024")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        dtype, d, seq, mode = args.child.split(":")
        print(json.dumps(child(dtype, int(d), int(seq), mode == "serial")))
        return
    for i, case in enumerate(args.cases.split(",")):
        for mode in ("serial", "threads") if i % 2 == 0 else ("threads", "serial"):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TRITON_CACHE_DIR=cache)
                begin = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, __file__, "--child", f"{case}:{mode}"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["process_s"] = round(time.perf_counter() - begin, 2)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
