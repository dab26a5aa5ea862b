"""The optimizer step inside the backward pass: each parameter updated as soon as its gradient lands.

A train step runs the backward, then AdamW over every parameter. AdamW is bound by HBM bandwidth
(28 B/param at best: 25-30 ms for a 2.7B model on an H100), the backward by its matmuls. Updated
one parameter at a time, from a hook that runs once autograd has accumulated that parameter's
gradient, and on a second CUDA stream, the update of layer i runs while the backward works on
layers i-1 ... 0: the memory-bound kernels fill the gaps the compute-bound ones leave, instead of
following them. torchtitan and torch's "optimizer in backward" recipes do the same.

It is the same step. AdamW updates each parameter from its own gradient and state (there is no
gradient clipping or global norm in this train step), and a parameter's update can only start
once its gradient is final. Nothing later in the backward reads a weight whose gradient is done.

Used in place of the optimizer in ``lmperf.training.make_step``: ``zero_grad`` arms the hooks for
the coming backward, ``step`` makes the main stream wait for the side stream and disarms them, so
a model shared with other steps (the ladder's rungs) is left as it was. Capturable as a CUDA graph
when the optimizer is: the side stream forks from and joins the capturing stream.
"""

import torch

from lmperf.model.optim import AdamW


class OptimizerInBackward:
    """Run ``optimizer``'s update of each parameter from its post-accumulate-grad hook, on a side
    stream on a GPU (inline on a CPU)."""

    def __init__(self, optimizer: AdamW):
        self.optimizer, self.armed = optimizer, False
        self.groups = {p: group for group in optimizer.param_groups for p in group["params"]}
        device = next(iter(self.groups)).device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self.groups]

    def _on_grad(self, p: torch.Tensor) -> None:
        if not self.armed:  # another step's backward on the same model
            return
        if self.stream is None:
            self.optimizer.update([p], self.groups[p])
            return
        self.stream.wait_stream(torch.cuda.current_stream(p.device))  # the gradient is written
        with torch.cuda.stream(self.stream):
            self.optimizer.update([p], self.groups[p])

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)
        self.armed = True

    def step(self) -> None:
        """Nothing left to update: wait for the side stream's updates, then disarm the hooks."""
        if self.stream is not None:
            torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)
        self.armed = False

    def remove(self) -> None:
        """Take the hooks off the parameters."""
        for hook in self.hooks:
            hook.remove()
