"""Interleaved A/B of head sizes that are not a power of two: our kernels holding the head as
column blocks (this commit; d = 80 as 64 + 16) against the same kernels padding the head to a
power of two (the file at the commit given as argv[1]; d = 80 padded to 128), with SDPA cuDNN and
SDPA flash beside them. Shapes: the 2.7B model's attention (batch 4 x 32 heads, context 512 and
1024, d = 80) and the leaderboard shape (d = 64, where both hold one block). Each round times
every implementation once, launched (do_bench) and as a replayed CUDA graph (lmperf's
capture_graph, replays timed by do_bench); five rounds, medians.

Ran at: 866acdc26808 and 7db49c6f7ea0 (H100 80GB HBM3, argument f8989f6), output: the table of
    notes/flash-hopper.md, "Head sizes that are not a power of two" (not kept as a file)

    python notes/flash_hopper/ab_heads.py f8989f6
"""

import importlib.util
import statistics
import subprocess
import sys

sys.path.insert(0, "notes/flash_hopper")
import torch
from common import passes, rounds, sdpa
from torch.nn.attention import SDPBackend

from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.measure.timing import GraphUnavailable, capture_graph


def padded_kernels(commit):
    path = "/tmp/flash_padded.py"  # Triton compiles @jit functions from a file
    with open(path, "w") as f:
        f.write(subprocess.check_output(["git", "show", f"{commit}:src/lmperf/attention/flash_triton.py"], text=True))
    spec = importlib.util.spec_from_file_location("flash_padded", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FlashAttentionTriton


def main() -> None:
    cudnn, flash = sdpa(SDPBackend.CUDNN_ATTENTION), sdpa(SDPBackend.FLASH_ATTENTION)
    IMPLEMENTATIONS = {
        "blocks": FlashAttentionTriton.apply,
        "padded": padded_kernels(sys.argv[1]).apply,
        "sdpa_cudnn": lambda q, k, v, c: cudnn(q, k, v),
        "sdpa_flash": lambda q, k, v, c: flash(q, k, v),
    }
    SHAPES = [(128, 512, 80), (128, 1024, 80), (16, 16384, 64)]

    for batch, seq, d in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(seq + d)
        q, k, v = (
            torch.randn(batch, seq, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_() for _ in "qkv"
        )
        out = {name: fn(q, k, v, True) for name, fn in IMPLEMENTATIONS.items()}  # autotune, compile
        worst = max((out[n].float() - out["sdpa_cudnn"].float()).abs().max().item() for n in ("blocks", "padded"))
        # The outputs' graphs hold q, k and v's gradient accumulators, which remember the stream they
        # were made on (the default one); backward captured on another stream must make new ones.
        del out
        steps = {}
        for name, fn in IMPLEMENTATIONS.items():
            for pass_, run in passes(lambda q, k, v, fn=fn: fn(q, k, v, True), q, k, v).items():
                steps[pass_, "launched", name] = run
                try:
                    steps[pass_, "graphed", name] = capture_graph(run, torch.device("cuda"))
                except GraphUnavailable as error:
                    print(f"{pass_} {name}: {error}; cause: {str(error.__cause__.__context__).splitlines()[0]}")
        times = rounds(steps)
        print(f"\nbatch*heads {batch} seq {seq} d {d}  (max |O - cuDNN| of ours: {worst:.3g})")
        for (pass_, mode, name), xs in sorted(times.items()):
            print(f"{pass_:>16} {mode:>8} {name:>10} {statistics.median(xs):8.4f} ms  [{min(xs):.4f}, {max(xs):.4f}]")


if __name__ == "__main__":
    main()
