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
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t, m, v, grad = state["t"], state["m"], state["v"], p.grad
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-step_size)
                p.mul_(1 - lr * weight_decay)
        return loss


OPTIMIZERS = ("lmperf", "torch_fused")


def make_optimizer(name: str, params: Iterable, **kwargs) -> torch.optim.Optimizer:
    """'lmperf' is the AdamW above; 'torch_fused' is torch.optim.AdamW(fused=True)."""
    if name == "lmperf":
        return AdamW(params, **kwargs)
    if name == "torch_fused":
        return torch.optim.AdamW(params, fused=True, **kwargs)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
