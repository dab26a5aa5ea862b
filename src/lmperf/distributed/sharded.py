"""Optimizer state sharding (ZeRO stage 1's idea): each rank keeps optimizer state for its share
of the parameters only, steps that share, and broadcasts the updated parameters to the others."""

import torch
import torch.distributed as dist


class ShardedOptimizer(torch.optim.Optimizer):
    """ShardedOptimizer(params, torch.optim.AdamW, lr=...): the same updates as the unsharded optimizer.

    Parameters are assigned, largest first within each group, to the rank with the fewest elements
    so far, so shards are balanced by size; every rank computes the same assignment.
    """

    def __init__(self, params, optimizer_cls: type[torch.optim.Optimizer], **kwargs):
        self.optimizer_cls = optimizer_cls
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.owner: dict[int, int] = {}
        self.loads = [0] * self.world_size
        self.local_optimizer: torch.optim.Optimizer | None = None
        super().__init__(params, kwargs)  # calls add_param_group for each group

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        mine = []
        for p in sorted(group["params"], key=lambda t: -t.numel()):
            owner = min(range(self.world_size), key=self.loads.__getitem__)
            self.owner[id(p)] = owner
            self.loads[owner] += p.numel()
            if owner == self.rank:
                mine.append(p)
        if not mine:
            return
        local_group = {**{k: v for k, v in group.items() if k != "params"}, "params": mine}
        if self.local_optimizer is None:
            self.local_optimizer = self.optimizer_cls([local_group], **self.defaults)
        else:
            self.local_optimizer.add_param_group(local_group)

    @torch.no_grad()
    def step(self, closure=None, **kwargs):
        loss = None
        if self.local_optimizer is not None:
            loss = self.local_optimizer.step(closure, **kwargs)
        elif closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                dist.broadcast(p.data, src=self.owner[id(p)])
        return loss
