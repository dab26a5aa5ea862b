"""Start N worker processes on one machine, with a timeout, so a hung rank fails instead of hanging."""

import os
import socket
import sys
import time

import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world_size, port, backend, fn, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()
    # Gloo's threads can still hold tensors when the interpreter finalizes, and releasing them then
    # aborts the process ("terminate called without an active exception", no Python frame; seen in
    # this test suite, cf. pytorch/pytorch#179291). The work is done and the group destroyed, so
    # the worker leaves without finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_workers(fn, world_size: int, *args, backend: str = "gloo", timeout_s: float = 120) -> None:
    """Run fn(rank, world_size, *args) in world_size processes joined in one process group.

    Raises TimeoutError (after killing every worker) when they have not all finished in timeout_s,
    and the worker's exception when one fails.
    """
    context = mp.start_processes(
        _worker, args=(world_size, free_port(), backend, fn, args), nprocs=world_size, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    try:
        # join() returns False on its timeout and also whenever one worker ends before the rest
        while not context.join(timeout=max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{world_size} workers did not finish within {timeout_s} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
