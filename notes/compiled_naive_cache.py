"""Does compiled naive attention time the same with a cold and a warm compile cache?

Question: the flash sweep at fp32, d = 64 ran twice on one H200, one job after the other, the second
with the run's compile cache warm from the first. Ours and naive attention timed the same (0.998-1.009),
but compiled naive attention's forward differed by up to 21% (16384: 3.47 ms cold, 2.75 warm), 18 of
its 19 graphed medians resolved apart. The sweep compiles it once (``torch.compile(naive_attention)``, shapes
``dynamic=None``): the first length compiles static, a second length recompiles with the sequence
dynamic (automatic dynamic shapes), and that one graph serves every later length. Is the difference
the cache, and does compiling each length static (``dynamic=False``, as e2e compiles its blocks)
time the same cold and warm?

For each way of compiling, two fresh processes share one empty ``TORCHINDUCTOR_CACHE_DIR`` (and
Triton cache): the first compiles cold, the second finds the first's cache. Each runs the sweep's
passes in its order (forward, backward, forward + backward at each length; batch 1, causal, fp32,
d = 64) through ``lmperf.studies.flash.time_pass`` (do_bench, launched, 25 ms warm-up and 100 ms)
and prints each length's medians.

    python notes/compiled_naive_cache.py [--seq-lengths 128,1024,4096,8192,16384]

Ran at: 4f8e524 with this script uncommitted (NVIDIA H200), output: logs/2026-12-01-compiled_naive_cache-4f8e524-h200.txt
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SEQ_LENGTHS = "128,1024,4096,8192,16384"
PASSES = ("forward", "backward", "forward_backward")


def child(dynamic: str, seq_lengths: list[int]) -> None:
    """The sweep's passes of compiled naive attention at each length, compiled ``dynamic``."""
    import torch

    from lmperf.attention.naive import naive_attention
    from lmperf.recompiles import allow_recompiles
    from lmperf.studies.flash import time_pass

    torch._functorch.config.donated_buffer = False  # as the sweep: backward re-run on one graph
    if dynamic == "false":
        allow_recompiles()  # one graph per length and grad mode
        compiled = torch.compile(naive_attention, dynamic=False)
    else:
        compiled = torch.compile(naive_attention)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # a CPU only to try the script's plumbing
    for seq in seq_lengths:
        g = torch.Generator(device=device).manual_seed(seq)
        q, k, v = (torch.randn(1, seq, 64, device=device, generator=g).requires_grad_() for _ in range(3))
        row = {"seq": seq}
        for pass_ in PASSES:
            attention = lambda a, b, c, causal: compiled(a, b, c, is_causal=causal)  # noqa: E731 (as the sweep calls it)
            row[pass_] = time_pass(attention, q, k, v, True, pass_, 25, 100)
        print(json.dumps(row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-lengths", default=SEQ_LENGTHS)
    p.add_argument("--child", choices=("auto", "false"), help=argparse.SUPPRESS)
    args = p.parse_args()
    lengths = [int(n) for n in args.seq_lengths.split(",")]
    if args.child:
        child(args.child, lengths)
        return
    import torch

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; ms, do_bench medians, launched")
    for dynamic in ("auto", "false"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
            for run in ("cold", "warm"):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", dynamic, "--seq-lengths", args.seq_lengths],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
                if out.returncode:
                    print(f"dynamic={dynamic} {run}: exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
                for row in rows:
                    cells = " | ".join(f"{row[p]:.4f}" for p in PASSES)
                    print(f"dynamic={dynamic} | {run} | {row['seq']} | {cells}", flush=True)


if __name__ == "__main__":
    main()
