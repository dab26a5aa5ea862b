"""AdamW in one Triton pass: read p, g, m, v once, write p, m, v once.

lmperf's AdamW (``lmperf.model.optim``) spells the update as ~10 multi-tensor ops, each a full
pass over HBM: about 72 bytes per parameter. The update needs 28 (four fp32 reads, three writes),
so it is bandwidth-bound at 28 B/param and one fused pass reaches that bound. Same semantics (CS336
Assignment 1): per-parameter step count t on the device, bias correction folded into the step size,
decoupled weight decay applied after the Adam step. Same state (t, m, v), so the two optimizers
can take turns on one model.

One launch for many parameters, as torch's multi-tensor kernels: a launch per parameter ramps up
and drains once per parameter, which at the small model (111 parameters, 128 M elements) held the
update at 80% of the copy bandwidth (report/reference/h100/ladder-grid/). torch passes its tensor
lists to the kernel by value; a Triton kernel takes a fixed set of arguments, so the list is a
table of addresses in device memory instead (as in Triton's grouped-GEMM tutorial), one per set of
addresses it has seen: a CUDA graph's memcpy of the table reads the host copy that the table keeps.

Capturable: t is incremented on the device and read by the kernel, so a CUDA graph of the step
replays as any later step.

Master weights: a parameter stored in bf16 keeps an fp32 copy, ``state["master"]``, and fp32 m and
v. The kernel updates the master and writes its bf16 rounding to the parameter in the same pass.
The model then multiplies by bf16 weights directly: under autocast, the same products as casting
fp32 weights every step, without that cast (6 B/param in the forward) or the cast of the weight
gradient back to fp32 (6 B/param in the backward). Still 28 B/param here: the gradient is read in
bf16 (2 B, not 4) and the bf16 weight written (2 B).
"""

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from lmperf.model.optim import AdamW


class Hyper(NamedTuple):
    """A group's hyperparameters as the kernels take them: the logs of the betas for the bias
    corrections' powers, and the weight decay as the factor it multiplies the weights by."""

    lr: float
    beta1: float
    beta2: float
    log2_beta1: float
    log2_beta2: float
    eps: float
    decay: float

    @classmethod
    def of(cls, group: dict) -> "Hyper":
        (beta1, beta2), lr = group["betas"], group["lr"]
        return cls(lr, beta1, beta2, math.log2(beta1), math.log2(beta2), group["eps"], 1 - lr * group["weight_decay"])


BLOCK = 2048  # elements per program: 8 KiB of each fp32 stream, 4 warps
ALIGN = 16  # a listed tensor's addresses are multiples of this many bytes, and its size of this many elements


@triton.jit
def _adamw_block(
    p_ptr,
    w_ptr,  # the fp32 master weights; p_ptr itself where the parameter is its own master
    g_ptr,
    m_ptr,
    v_ptr,
    t_ptr,
    n_elements,
    block,
    hyper,  # a Hyper
    HAS_MASTER: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The update of one parameter's ``block``-th BLOCK of elements."""
    offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    lr, beta1, beta2, eps = hyper.lr, hyper.beta1, hyper.beta2, hyper.eps
    t = tl.load(t_ptr)
    g = tl.load(g_ptr + offsets, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offsets, mask=mask)
    v = tl.load(v_ptr + offsets, mask=mask)
    p = tl.load(w_ptr + offsets, mask=mask).to(tl.float32)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    # lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), with b^t = 2^(t log2 b)
    step_size = lr * tl.sqrt(1 - tl.exp2(t * hyper.log2_beta2)) / (1 - tl.exp2(t * hyper.log2_beta1))
    p = p - step_size * m / (tl.sqrt(v) + eps)
    p = p * hyper.decay
    tl.store(m_ptr + offsets, m, mask=mask)
    tl.store(v_ptr + offsets, v, mask=mask)
    tl.store(w_ptr + offsets, p.to(w_ptr.dtype.element_ty), mask=mask)
    if HAS_MASTER:  # round to nearest even on a GPU (Triton's interpreter truncates)
        tl.store(p_ptr + offsets, p.to(p_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _adamw_kernel(
    p_ptr,
    w_ptr,
    g_ptr,
    m_ptr,
    v_ptr,
    t_ptr,
    n_elements,
    hyper,
    HAS_MASTER: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """One parameter: program i updates its i-th BLOCK."""
    _adamw_block(
        p_ptr,
        w_ptr,
        g_ptr,
        m_ptr,
        v_ptr,
        t_ptr,
        n_elements,
        tl.program_id(0),
        hyper,
        HAS_MASTER,
        BLOCK,
    )


@triton.jit
def _adamw_list_kernel(
    table_ptr,  # int64 (8, n_tensors): rows p, master, g, m, v, t addresses; size; first program
    n_tensors,
    hyper,
    P_TYPE: tl.constexpr,
    G_TYPE: tl.constexpr,
    HAS_MASTER: tl.constexpr,
    SEARCH_STEPS: tl.constexpr,  # ceil(log2(n_tensors))
    BLOCK: tl.constexpr,
):
    """Many parameters: program i finds its tensor by a binary search over the table's first-program
    row, then updates that tensor's BLOCK. The addresses and sizes are read from memory, so the
    compiler cannot see their alignment; the hints give it (the caller lists only tensors that have
    it), and with them the loads are as wide as the one-parameter kernel's."""
    pid = tl.program_id(0)
    first = table_ptr + 7 * n_tensors
    lo = pid * 0  # the tensor j with first[j] <= pid < first[j + 1], searched in [lo, hi)
    hi = lo + n_tensors
    for _ in tl.static_range(SEARCH_STEPS):
        mid = (lo + hi) // 2
        right = tl.load(first + mid) <= pid
        lo = tl.where(right, mid, lo)
        hi = tl.where(right, hi, mid)
    column = table_ptr + lo
    p_ptr = tl.multiple_of(tl.load(column).to(tl.pointer_type(P_TYPE)), 16)
    w_ptr = tl.multiple_of(tl.load(column + n_tensors).to(tl.pointer_type(tl.float32)), 16)
    g_ptr = tl.multiple_of(tl.load(column + 2 * n_tensors).to(tl.pointer_type(G_TYPE)), 16)
    m_ptr = tl.multiple_of(tl.load(column + 3 * n_tensors).to(tl.pointer_type(tl.float32)), 16)
    v_ptr = tl.multiple_of(tl.load(column + 4 * n_tensors).to(tl.pointer_type(tl.float32)), 16)
    t_ptr = tl.load(column + 5 * n_tensors).to(tl.pointer_type(tl.float32))
    n_elements = tl.multiple_of(tl.load(column + 6 * n_tensors), 16)
    block = pid - tl.load(first + lo)
    _adamw_block(
        p_ptr,
        w_ptr,
        g_ptr,
        m_ptr,
        v_ptr,
        t_ptr,
        n_elements,
        block,
        hyper,
        HAS_MASTER,
        BLOCK,
    )


TRITON_TYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


def _listable(p: torch.Tensor, s: dict) -> bool:
    """Whether ``p`` can go in a table: known dtypes, ALIGN-byte addresses, a size in ALIGN elements."""
    tensors = (p, p.grad, s["m"], s["v"], s.get("master", p))
    return (
        p.dtype in TRITON_TYPES
        and p.grad.dtype in TRITON_TYPES
        and p.numel() % ALIGN == 0
        and all(x.data_ptr() % ALIGN == 0 for x in tensors)
    )


class Table(NamedTuple):
    """One address table of ``_adamw_list_kernel``: the addresses it was made for, its host copy (kept
    alive for the copy to the device, and for a graph's replays of it), the device copy, the programs."""

    key: tuple
    host: torch.Tensor
    device_copy: torch.Tensor
    programs: int


class FusedAdamW(AdamW):
    """lmperf's AdamW with the update in Triton: one launch per dtype for many parameters, one per
    parameter where a parameter is alone or unaligned; fp32 state, and fp32 master weights for a
    parameter stored in lower precision."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._captured: dict[tuple, Table] = {}  # by addresses: each kept while a graph may replay it
        self._recent: dict[int, Table] = {}  # by its first parameter's address: a chunk's last launched table

    def new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        if p.dtype == torch.float32:
            return super().new_state(p)
        master = p.detach().float()
        t = torch.zeros((), device=p.device)
        return dict(t=t, m=torch.zeros_like(master), v=torch.zeros_like(master), master=master)

    def _update(self, params: list[torch.Tensor], group: dict) -> None:
        hyper = Hyper.of(group)
        state = [self.state[p] for p in params]
        torch._foreach_add_([s["t"] for s in state], 1)
        lists: dict[tuple, list] = {}
        for p, s in zip(params, state):
            if not (p.is_contiguous() and p.grad.is_contiguous()):
                raise ValueError("FusedAdamW needs contiguous parameters and gradients")
            if len(params) > 1 and _listable(p, s):
                lists.setdefault((p.dtype, p.grad.dtype, p.device), []).append((p, s))
                continue
            n = p.numel()
            _adamw_kernel[(triton.cdiv(n, BLOCK),)](
                p,
                s.get("master", p),
                p.grad,
                s["m"],
                s["v"],
                s["t"],
                n,
                hyper,
                HAS_MASTER="master" in s,
                BLOCK=BLOCK,
            )
        for (p_dtype, g_dtype, device), members in lists.items():
            table, programs = self._table(members, device)
            _adamw_list_kernel[(programs,)](
                table,
                len(members),
                hyper,
                P_TYPE=TRITON_TYPES[p_dtype],
                G_TYPE=TRITON_TYPES[g_dtype],
                HAS_MASTER=p_dtype != torch.float32,
                SEARCH_STEPS=max(1, math.ceil(math.log2(len(members)))),
                BLOCK=BLOCK,
            )

    def _table(self, members: list, device: torch.device) -> tuple[torch.Tensor, int]:
        """The address table of ``members`` on ``device``, and the programs it takes.

        Launched steps reuse a chunk's last table while the addresses stay (the caching allocator
        mostly hands a step's gradients the same memory), and replace it when they move. The host copy
        is pinned, so the copy does not wait for the GPU, and so it may be captured: torch's pinned
        allocator serves a capture from the graph's own pool. A table that a CUDA graph reads is kept
        for as long as the optimizer lives, with its host copy: one made during the capture is copied
        again from it at every replay."""
        columns, first = [], 0
        for p, s in members:
            tensors = (p, s.get("master", p), p.grad, s["m"], s["v"], s["t"])
            columns.append([x.data_ptr() for x in tensors] + [p.numel(), first])
            first += triton.cdiv(p.numel(), BLOCK)
        key = tuple(address for column in columns for address in column[:6])
        capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        table = self._captured.get(key) or self._recent.get(key[0])
        if table is None or table.key != key:
            host = torch.tensor(columns, dtype=torch.int64).T.contiguous()
            if device.type == "cuda":
                host = host.pin_memory()
            table = Table(key, host, host.to(device, non_blocking=True), first)
        if capturing:  # the graph reads the device copy at every replay: never replaced
            self._captured[key] = table
        else:
            self._recent[key[0]] = table
        return table.device_copy, table.programs
