"""What every rank must see alike: a step's time is its slowest rank's, and a decision to stop
measuring is taken by all ranks together (a rank that stops alone leaves the others hanging in
the next collective)."""

import torch
import torch.distributed as dist


def slowest_rank(values: list[float]) -> list[float]:
    """Per-iteration maximum over ranks (every rank passes the same number of values)."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, values)
    return [max(per_rank[i] for per_rank in everyone) for i in range(len(values))]


def all_agree(stop: bool) -> bool:
    """True when every rank wants to stop; a small all-reduce outside any timed region."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    flag = torch.tensor([1 if stop else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
