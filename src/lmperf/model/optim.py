"""AdamW with the CS336 semantics, and the choice between it and torch's fused AdamW."""

from collections.abc import Iterable

import torch

from lmperf import grid


def repeated_batch_lr(d_model: int) -> float:
    """The learning rate at which one batch, stepped on again and again, trains stably: 0.032 / d_model
    (1e-3 for nano, 4.2e-5 for small, 1.25e-5 for 2.7B). The timed train steps (e2e, batch) and the
    ladder's loss checks step on one batch.

    Adam moves every weight by about lr a step, so a layer's output by about lr × fan-in: this keeps
    that near 3% of its scale at every size. At 1e-3 a 2.7B model's 20 steps on one batch are chaotic:
    two AdamWs that differ only in rounding ended 0.44 apart in loss (H100, commit b71167951f1d; the
    same in notes/one-allocation.md, section 11), and e2e's replayed train steps made its weights
    non-finite at every context (section 17 there). The update runs the same kernels and arithmetic
    at any rate; at the power limit the values it multiplies can still move the clock (section 10).
    """
    return 0.032 / d_model


class AdamW(torch.optim.Optimizer):
    """Decoupled weight decay Adam (Loshchilov & Hutter), as specified in CS336 Assignment 1.

    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)
    p <- p - lr_t m / (sqrt(v) + eps);  p <- p - lr * weight_decay * p
    """

    def __init__(
        self, params: Iterable, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01
    ):
        if lr < 0:
            raise ValueError(f"invalid learning rate: {lr}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient.

        Written with torch's multi-tensor (_foreach) ops: the same arithmetic as a per-parameter
        loop, but a handful of kernel launches per chunk instead of seven per parameter. Chunks of
        at most CHUNK_BYTES bound the temporary sqrt(v) buffer.

        Capturable: each parameter's step count t lives on its device, and the bias corrections
        are computed there, so no host-side value changes between steps. One captured step replays
        as any later one, and the launched and graphed train steps run the same kernels.
        """
        loss = None if closure is None else closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for chunk in _chunks(params, self.CHUNK_BYTES):
                self.update(chunk, group)
        return loss

    CHUNK_BYTES = 512 * 2**20

    @torch.no_grad()
    def update(self, params: list[torch.Tensor], group: dict) -> None:
        """One update of ``params`` (of ``group``, each with a gradient), their state made on first use.

        ``step`` calls it per chunk; ``lmperf.model.optim_in_backward`` per parameter, from the hook
        that runs once that parameter's gradient is final.
        """
        for p in params:
            self.state_of(p)
        self._update(params, group)

    def state_of(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """``p``'s state, made by ``new_state`` on first use."""
        if not self.state[p]:
            self.state[p].update(self.new_state(p))
        return self.state[p]

    def new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """A parameter's state before its first step: step count t (on its device), m and v."""
        t = torch.zeros((), device=p.device, dtype=torch.promote_types(p.dtype, torch.float32))
        return dict(t=t, m=torch.zeros_like(p), v=torch.zeros_like(p))

    def _update(self, params: list[torch.Tensor], group: dict) -> None:
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        grads = [p.grad for p in params]
        state = [self.state[p] for p in params]
        m, v, t = [s["m"] for s in state], [s["v"] for s in state], [s["t"] for s in state]
        torch._foreach_add_(t, 1)
        torch._foreach_lerp_(m, grads, 1 - beta1)  # m = b1 m + (1 - b1) g
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        # 1 / lr_t = (1 - b1^t) / (lr sqrt(1 - b2^t)), per parameter, on the device
        inv_step = torch._foreach_pow(beta1, t)
        torch._foreach_sub_(inv_step, 1)  # b1^t - 1 = -(1 - b1^t): the sign makes the update a subtraction
        root = torch._foreach_pow(beta2, t)
        torch._foreach_mul_(root, -1)
        torch._foreach_add_(root, 1)
        torch._foreach_sqrt_(root)
        torch._foreach_mul_(root, lr)
        torch._foreach_div_(inv_step, root)
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, eps)
        torch._foreach_mul_(denom, inv_step)  # -(sqrt(v) + eps) / lr_t
        torch._foreach_addcdiv_(params, m, denom)  # p - lr_t m / (sqrt(v) + eps)
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


OPTIMIZERS = grid.OPTIMIZERS


def make_optimizer(name: str, params: Iterable, **kwargs) -> torch.optim.Optimizer:
    """'lmperf' is the AdamW above; 'lmperf_fused' the same in one Triton pass per parameter
    (lmperf.kernels.fused_adamw); 'torch_fused' is torch.optim.AdamW(fused=True)."""
    if name == "lmperf":
        return AdamW(params, **kwargs)
    if name == "lmperf_fused":
        from lmperf.kernels.fused_adamw import FusedAdamW  # imports triton: only when used

        return FusedAdamW(params, **kwargs)
    if name == "torch_fused":  # capturable on a GPU: the step count on the device, so a CUDA graph can replay it
        params = list(params)
        capturable = all(p.is_cuda for p in params)
        return torch.optim.AdamW(params, fused=True, capturable=capturable, **kwargs)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
