"""The handout's communication accounting for the XXL model, computed rather than typed.

XXL: d_model 16384, d_ff 53248, 126 blocks, each block two linear layers (d_model -> d_ff -> d_model;
attention, embeddings and the output layer omitted). Master weights, accumulated gradients and AdamW's
two moments are fp32; activations and gradient communication are bf16; no activation checkpointing.
The parallel cost model is the TPU Scaling Book's, with its TPU v5p numbers.
"""

import math
from dataclasses import dataclass

GB = 1e9  # the handout's GB (device sizes "80GB", "95GB" are decimal)


@dataclass(frozen=True)
class FFNStack:
    d_model: int = 16384
    d_ff: int = 53248
    blocks: int = 126

    @property
    def params(self) -> int:
        return 2 * self.d_model * self.d_ff * self.blocks

    def state_bytes(self) -> dict[str, int]:
        """fp32 master weights, gradients and AdamW's first and second moments."""
        return {"master weights": 4 * self.params, "gradients": 4 * self.params, "optimizer state": 8 * self.params}

    def activation_bytes_per_token(self) -> int:
        """bf16 tensors saved for backward per token: each block's input (d_model) and hidden (d_ff)."""
        return 2 * (self.d_model + self.d_ff) * self.blocks


def devices_needed(total_bytes: float, device_bytes: float) -> int:
    return math.ceil(total_bytes / device_bytes)


def fsdp_bytes_per_device(model: FFNStack, n_fsdp: int, tokens: int) -> float:
    """Weights, gradients, optimizer state and half the activations sharded over n_fsdp devices; the
    other half of the activations (every second layer) stays whole on each device."""
    activations = model.activation_bytes_per_token() * tokens
    return (sum(model.state_bytes().values()) + activations / 2) / n_fsdp + activations / 2


def smallest_fsdp(model: FFNStack, device_bytes: float, tokens: int) -> int | None:
    """The least n_fsdp whose per-device memory fits device_bytes (None if the unsharded half never fits)."""
    fixed = model.activation_bytes_per_token() * tokens / 2
    if fixed >= device_bytes:
        return None
    sharded = sum(model.state_bytes().values()) + fixed
    return math.ceil(sharded / (device_bytes - fixed))


@dataclass(frozen=True)
class Mesh:
    """FSDP over X devices, tensor parallelism over Y; M_X, M_Y links per axis (3-D torus: 2, 1)."""

    x: int = 16
    y: int = 4
    m_x: int = 2
    m_y: int = 1
    w_ici: float = 2 * 9e10  # bytes/s per link, bidirectional (TPU v5p)
    c: float = 4.6e14  # bf16 FLOP/s per chip (TPU v5p)


def compute_bound_batch(model: FFNStack, mesh: Mesh) -> dict[str, float]:
    """Forward pass only. Per layer with B tokens on N = X*Y chips (Scaling Book, mixed FSDP + TP):

        T_math = 4 B D F / (N C)
        T_fsdp = 4 D F / (Y W M_X)     all-gather of the bf16 weights over the X axis
        T_tp   = 4 B D / (X W M_Y)     all-gather + reduce-scatter of bf16 activations over Y

    Compute-bound needs T_math >= T_fsdp, i.e. B >= X C / (W M_X), and T_math >= T_tp, i.e.
    F >= Y C / (W M_Y), which does not depend on B.
    """
    alpha = mesh.c / mesh.w_ici
    n = mesh.x * mesh.y
    total = mesh.x * alpha / mesh.m_x
    return {
        "alpha": alpha,
        "devices": n,
        "batch_tokens": total,
        "per_device_tokens": total / n,
        "tp_condition_d_ff": mesh.y * alpha / mesh.m_y,
        "tp_bound_ok": model.d_ff >= mesh.y * alpha / mesh.m_y,
    }
