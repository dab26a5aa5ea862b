"""The DDP train experiment with one lever pulled, for notes/ddp-overlap.md.

Runs ``python -m lmperf.studies.ddp train ...`` unchanged, under one of these levers:

- ``none``: as the pipeline runs it;
- ``no-comm``: our wrappers' all-reduces do nothing (torch DDP, the anchor, still communicates): the
  backward then pays our hooks' host time and their copies into bucket views, and no NCCL kernel
  shares the GPU with it;
- ``high-priority``: the NCCL process group's streams at CUDA's highest priority
  (``ProcessGroupNCCL.Options(is_high_priority_stream=True)``), torch DDP's included.

NCCL's channel count (how many SMs an all-reduce takes) needs no code here: set
``NCCL_MAX_NCHANNELS`` in the environment (and ``NCCL_MAX_CTAS``, the cap on NCCL's CTAs that newer
versions also read). That the cap took hold shows in flat's all-reduce, which slows with it.

Ran at: cf503a166729 (2 × NVIDIA H200), output: logs/2026-11-28-ddp-levers-cf503a1-h200x2.csv.gz

    python -m torch.distributed.run --standalone --nproc_per_node=2 notes/ddp_levers.py no-comm \\
        train --device cuda --size xl --global-batch 16 --variants local,individual --out no-comm.csv
"""

import sys

import torch.distributed

import lmperf.distributed.ddp
from lmperf.log import to_stderr
from lmperf.studies import ddp

LEVERS = ("none", "no-comm", "high-priority")


class _Done:
    """A finished all-reduce."""

    def wait(self) -> bool:
        return True


class _NoAllReduce:
    """torch.distributed, but all_reduce does nothing: what lmperf.distributed.ddp sees under no-comm."""

    def __getattr__(self, name):
        return getattr(torch.distributed, name)

    @staticmethod
    def all_reduce(tensor, *args, async_op: bool = False, **kwargs):
        return _Done() if async_op else None


def high_priority_streams() -> None:
    """Make every NCCL process group the study starts use high-priority streams."""
    init = torch.distributed.init_process_group

    def init_high_priority(backend=None, *args, **kwargs):
        if backend == "nccl":
            kwargs["pg_options"] = torch.distributed.ProcessGroupNCCL.Options(is_high_priority_stream=True)
        return init(backend, *args, **kwargs)

    torch.distributed.init_process_group = init_high_priority


if __name__ == "__main__":
    lever, argv = sys.argv[1], sys.argv[2:]
    if lever not in LEVERS:
        raise SystemExit(f"unknown lever {lever!r}; choose from {', '.join(LEVERS)}")
    if lever == "no-comm":
        lmperf.distributed.ddp.dist = _NoAllReduce()
    elif lever == "high-priority":
        high_priority_streams()
    to_stderr()
    ddp.main(argv)
