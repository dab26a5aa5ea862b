"""AdamW with the CS336 semantics, and the choice between it and torch's fused AdamW."""

import math
from collections.abc import Iterable

import torch


class AdamW(torch.optim.Optimizer):
    """Decoupled weight decay Adam (Loshchilov & Hutter), as specified in CS336 Assignment 1.

    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)
    p <- p - lr_t m / (sqrt(v) + eps);  p <- p - lr * weight_decay * p
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        if lr < 0:
            raise ValueError(f"invalid learning rate: {lr}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient.

        Written with torch's multi-tensor (_foreach) ops: the same arithmetic as a per-parameter
        loop, but a handful of kernel launches per chunk instead of seven per parameter. Chunks of
        at most CHUNK_BYTES bound the temporary sqrt(v) buffer.
        """
        loss = None if closure is None else closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                state = self.state[p]
                if not state:
                    state.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["t"] += 1
            by_step: dict[int, list] = {}
            for p in params:
                by_step.setdefault(self.state[p]["t"], []).append(p)
            for t, same_step in by_step.items():
                for chunk in _chunks(same_step, self.CHUNK_BYTES):
                    self._update(chunk, t, group)
        return loss

    CHUNK_BYTES = 512 * 2**20

    def _update(self, params: list[torch.Tensor], t: int, group: dict) -> None:
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        grads = [p.grad for p in params]
        m = [self.state[p]["m"] for p in params]
        v = [self.state[p]["v"] for p in params]
        torch._foreach_lerp_(m, grads, 1 - beta1)  # m = b1 m + (1 - b1) g
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, m, denom, value=-step_size)
        torch._foreach_mul_(params, 1 - lr * weight_decay)


def _chunks(tensors: list[torch.Tensor], max_bytes: int):
    """Consecutive runs of tensors of at most max_bytes each (a larger tensor forms a run alone)."""
    run, size = [], 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if run and size + nbytes > max_bytes:
            yield run
            run, size = [], 0
        run.append(tensor)
        size += nbytes
    if run:
        yield run


OPTIMIZERS = ("lmperf", "torch_fused")


def make_optimizer(name: str, params: Iterable, **kwargs) -> torch.optim.Optimizer:
    """'lmperf' is the AdamW above; 'torch_fused' is torch.optim.AdamW(fused=True)."""
    if name == "lmperf":
        return AdamW(params, **kwargs)
    if name == "torch_fused":
        return torch.optim.AdamW(params, fused=True, **kwargs)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
