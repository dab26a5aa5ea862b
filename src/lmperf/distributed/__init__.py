"""Data-parallel training pieces: DDP variants, optimizer state sharding, process launch."""

from lmperf.distributed.ddp import DDPBucketed, DDPFlat, DDPIndividualParameters, DDPNaive, make_buckets
from lmperf.distributed.launch import free_port, run_workers
from lmperf.distributed.sharded import ShardedOptimizer

__all__ = [
    "DDPBucketed",
    "DDPFlat",
    "DDPIndividualParameters",
    "DDPNaive",
    "ShardedOptimizer",
    "free_port",
    "make_buckets",
    "run_workers",
]
