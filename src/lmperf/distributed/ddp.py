"""Data-parallel wrappers, from the simplest to the one torch ships in spirit.

All of them broadcast rank 0's parameters and buffers at construction, expose the wrapped model as
``.module``, forward ``*args, **kwargs`` unchanged, and average gradients across ranks in
``finish_gradient_synchronization()`` (call it after ``backward()``, before ``optimizer.step()``).
Only parameters with ``requires_grad`` take part, in ``named_parameters()`` order; tied
parameters appear once there, so they are reduced once.

- DDPNaive: one blocking all-reduce per parameter after backward.
- DDPFlat: one all-reduce of all gradients flattened into one buffer.
- DDPIndividualParameters: one asynchronous all-reduce per parameter, launched by a
  post-accumulate-grad hook as soon as that gradient is final, so communication overlaps backward.
- DDPBucketed: the same overlap with gradients grouped into buckets of at most bucket_size_mb,
  filled in reverse parameter order (roughly the order backward produces them). Each bucket is one
  flat buffer, allocated once, and each parameter's ``.grad`` is a view into it, as torch DDP's
  ``gradient_as_bucket_view``: the buffer is all-reduced and averaged in place, so nothing is copied
  back into the gradients after the wait and no bucket is allocated per step. The one copy left is
  autograd's fresh gradient into its view where the step set gradients to None (torch's reducer
  does the same); where ``.grad`` already is the view, autograd accumulates into it. With
  ``comm_dtype=torch.bfloat16`` each bucket travels in bf16, half the bytes of fp32 gradients, as
  torch's ``bf16_compress_hook`` does for its DDP: the buffer is converted once and averaged before
  the all-reduce (the sum of bf16 values stays in range), and copied back into the fp32 buffer once
  after it.
"""

import time
import weakref

import torch
import torch.distributed as dist
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


class _DataParallel(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        self.world_size = dist.get_world_size()
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor, src=0)
        self.params = [p for _, p in module.named_parameters() if p.requires_grad]
        self.hook_seconds = 0.0  # host time in our gradient hooks since it was last reset

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, callback) -> None:
        """Call callback(param) once each parameter's gradient is accumulated in backward.

        The host time spent in the callbacks adds up in ``hook_seconds`` (launching all-reduces and
        bucket copies from Python costs the host time, beside the GPU's). The hook holds the wrapper
        only weakly: a parameter keeps its hooks in C++, out of the
        garbage collector's sight, so a strong reference would keep wrapper, model and gradients
        alive forever after the wrapper is dropped.
        """
        method = weakref.WeakMethod(callback)

        def hook(param):
            bound = method()
            if bound is not None:
                start = time.perf_counter()
                bound(param)
                bound.__self__.hook_seconds += time.perf_counter() - start

        for p in self.params:
            p.register_post_accumulate_grad_hook(hook)

    def _grads(self, params) -> list[torch.Tensor]:
        """Each parameter's gradient; a parameter the step did not use contributes zeros on every rank."""
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return [p.grad for p in params]


class DDPNaive(_DataParallel):
    def finish_gradient_synchronization(self) -> None:
        for grad in self._grads(self.params):
            dist.all_reduce(grad)
            grad.div_(self.world_size)


class DDPFlat(_DataParallel):
    def finish_gradient_synchronization(self) -> None:
        grads = self._grads(self.params)
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat.div_(self.world_size)
        for grad, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            grad.copy_(synced)


class DDPIndividualParameters(_DataParallel):
    def __init__(self, module: nn.Module):
        super().__init__(module)
        self._pending: list[tuple[dist.Work, torch.Tensor]] = []
        self._launched: set[int] = set()
        self._on_grad_ready(self._launch)

    def _launch(self, param: torch.Tensor) -> None:
        self._launched.add(id(param))
        self._pending.append((dist.all_reduce(param.grad, async_op=True), param.grad))

    def finish_gradient_synchronization(self) -> None:
        for p in self.params:  # parameters backward never reached
            if id(p) not in self._launched:
                self._launch(p) if p.grad is not None else self._launch_zero(p)
        for work, grad in self._pending:
            work.wait()
            grad.div_(self.world_size)
        self._pending.clear()
        self._launched.clear()

    def _launch_zero(self, param: torch.Tensor) -> None:
        param.grad = torch.zeros_like(param)
        self._launch(param)


class DDPBucketed(_DataParallel):
    """bucket_size_mb=None puts every gradient in one bucket; comm_dtype, if given, is the dtype the
    buckets are all-reduced in (None: the gradients' own).

    ``grad_buffers[i]`` is bucket i's flat buffer (its parameters' dtype and device), which holds
    their gradients in bucket order. A bucket's parameters must share dtype and device, since one
    buffer holds them. One backward per ``finish_gradient_synchronization()``: a second backward
    before it (gradient accumulation) raises, since its buckets were already sent.

    A step that zeroes its gradients with ``set_to_none=True`` (lmperf.training's train step, as
    torch's default) makes autograd hand each parameter a fresh gradient, copied into its view in
    the hook; with ``set_to_none=False`` autograd would accumulate into the views, with no copy.
    """

    def __init__(self, module: nn.Module, bucket_size_mb: float | None, comm_dtype: torch.dtype | None = None):
        super().__init__(module)
        self.comm_dtype = comm_dtype
        self.buckets = make_buckets(self.params, bucket_size_mb)
        self._bucket_of = {id(p): i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.grad_buffers, self._views = [], []
        for bucket in self.buckets:
            if len({(p.dtype, p.device) for p in bucket}) > 1:
                raise ValueError("a bucket's parameters must share dtype and device: they share one buffer")
            buffer = torch.zeros(sum(p.numel() for p in bucket), dtype=bucket[0].dtype, device=bucket[0].device)
            views = buffer.split([p.numel() for p in bucket])
            self.grad_buffers.append(buffer)
            self._views.append({id(p): view.view_as(p) for p, view in zip(bucket, views)})
        self.on_train_batch_start()
        self._on_grad_ready(self._ready)

    def on_train_batch_start(self) -> None:
        self._ready_count = [0] * len(self.buckets)
        self._pending: list[tuple[dist.Work, torch.Tensor, int]] = []

    def _into_view(self, index: int, param: torch.Tensor) -> None:
        """Make param.grad its view in bucket index's buffer, holding this step's gradient.

        Where .grad already is the view, autograd accumulated into it (or the step left it there)
        and nothing moves. A fresh gradient (the step set grads to None) is copied in. A parameter
        without a gradient, which backward never reached, gets zeros: its view still holds the
        previous step's gradient, and must add nothing to the other ranks' sum. Only parameters
        whose .grad is not the view are touched, so the zeroing costs nothing where every
        parameter is used.
        """
        view = self._views[index][id(param)]
        if param.grad is view:
            return
        if param.grad is None:
            view.zero_()
        else:
            view.copy_(param.grad)
        param.grad = view

    def _ready(self, param: torch.Tensor) -> None:
        index = self._bucket_of[id(param)]
        if self._ready_count[index] == len(self.buckets[index]):
            raise RuntimeError(
                "a second backward before finish_gradient_synchronization(): DDPBucketed all-reduces each "
                "bucket once per backward, so call it after every backward"
            )
        self._into_view(index, param)
        self._ready_count[index] += 1
        if self._ready_count[index] == len(self.buckets[index]):
            self._launch(index)

    def _launch(self, index: int) -> None:
        wire = self.grad_buffers[index]
        if self.comm_dtype is not None:
            wire = wire.to(self.comm_dtype).div_(self.world_size)
        self._pending.append((dist.all_reduce(wire, async_op=True), wire, index))

    def finish_gradient_synchronization(self) -> None:
        launched = {index for _, _, index in self._pending}
        for index, bucket in enumerate(self.buckets):  # buckets with a parameter backward never reached
            if index not in launched:
                for p in bucket:
                    self._into_view(index, p)
                self._launch(index)
        for work, wire, index in self._pending:
            work.wait()
            if self.comm_dtype is None:
                wire.div_(self.world_size)
            else:
                self.grad_buffers[index].copy_(wire)
        self.on_train_batch_start()


BF16 = "-bf16"  # a variant name's suffix: gradients all-reduced in bf16


def bucketed_settings(variant: str) -> tuple[float, torch.dtype | None]:
    """The bucket size (MB) and communication dtype a bucketed variant's name gives:
    ``bucketed-100`` -> (100.0, None), ``bucketed-25-bf16`` -> (25.0, torch.bfloat16)."""
    if not variant.startswith("bucketed-"):
        raise ValueError(f"{variant!r} is not a bucketed variant (bucketed-<MB>, or bucketed-<MB>{BF16})")
    size = variant.removeprefix("bucketed-").removesuffix(BF16)
    return float(size), torch.bfloat16 if variant.endswith(BF16) else None


def make_buckets(params: list[torch.Tensor], bucket_size_mb: float | None) -> list[list[torch.Tensor]]:
    """Consecutive groups of parameters, in reverse order, each of at most bucket_size_mb megabytes
    (1 MB = 2^20 bytes); a parameter larger than that forms a bucket of its own."""
    ordered = list(reversed(params))
    if bucket_size_mb is None:
        return [ordered] if ordered else []
    limit = bucket_size_mb * 2**20
    buckets, current, size = [], [], 0
    for p in ordered:
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes > limit:
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets
