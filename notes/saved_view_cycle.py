"""Does an autograd.Function that saves a view of the output it returns leak when no backward runs?

Our FlashAttention forward returned ``out`` and saved ``O``, a view of it (notes/flash-launch.md, "One
call's host timeline"). This runs a toy Function on this CPU that returns a fresh 4 MB tensor and
saves either that tensor or a view of it, 100 times with an input that needs grad, the output dropped
each time (no backward), then again with a backward each time, and prints how much the process's
resident memory grew, and whether the last call's graph node was freed when its output was dropped.

    python notes/saved_view_cycle.py > notes/logs/<date>-saved_view_cycle.txt

Ran at: 978cb015f0f1 (this 2-core CPU machine, torch 2.13), this script uncommitted then,
    output: notes/logs/2026-11-29-saved_view_cycle-cpu.txt
"""

import gc
import os
import weakref

import torch


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class Returns(torch.autograd.Function):
    """Returns a new (1000, 1000) float32 tensor; saves it, or a (10, 1000, 100) view of it."""

    @staticmethod
    def forward(ctx, x, save_view):
        out = torch.ones(1000, 1000)
        ctx.save_for_backward(out.view(1000, 10, 100).transpose(0, 1) if save_view else out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def main():
    x = torch.randn(1000, 1000, requires_grad=True)
    print(f"torch {torch.__version__}, 100 calls, each output 4 MB, dropped after the call")
    for save_view in (True, False):
        for backward in (False, True):
            gc.collect()
            before = resident_mb()
            for _ in range(100):
                y = Returns.apply(x, save_view)
                if backward:
                    y.sum().backward()
            node = weakref.ref(y.grad_fn)
            del y
            saved = "a view of the output" if save_view else "the output itself"
            print(
                f"saves {saved:20s} backward {'yes' if backward else 'no ':3s}: resident memory grew "
                f"{resident_mb() - before:6.0f} MB; last graph node freed: {node() is None}"
            )


if __name__ == "__main__":
    main()
