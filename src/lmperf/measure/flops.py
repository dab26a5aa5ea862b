"""Model FLOPs per step and MFU against the device's dense peak."""

from lmperf.model.transformer import ModelConfig, matmul_parameters
from lmperf.training import MODES

# Datasheet peaks by device-name substring, most specific first: dense (no sparsity) TFLOP/s, and
# HBM bandwidth in TB/s. fp32 is the non-tensor-core rate: torch's default float32 matmul precision
# ("highest") does not use TF32.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"bf16": 989.4, "fp32": 66.9, "hbm_tbps": 4.8}),
    ("H100 NVL", {"bf16": 835.0, "fp32": 60.0, "hbm_tbps": 3.9}),
    ("H100 PCIe", {"bf16": 756.0, "fp32": 51.2, "hbm_tbps": 2.0}),
    ("H100", {"bf16": 989.4, "fp32": 66.9, "hbm_tbps": 3.35}),
    ("GH200", {"bf16": 989.4, "fp32": 66.9, "hbm_tbps": 4.0}),
    ("A100", {"bf16": 312.0, "fp32": 19.5, "hbm_tbps": 2.0}),
    ("L40S", {"bf16": 362.1, "fp32": 91.6, "hbm_tbps": 0.864}),
    ("A10G", {"bf16": 70.0, "fp32": 31.2, "hbm_tbps": 0.6}),
    ("RTX 4090", {"bf16": 165.2, "fp32": 82.6, "hbm_tbps": 1.008}),
]

# AdamW's least traffic per fp32 parameter: read p, g, m, v and write p, m, v once, 4 bytes each.
ADAMW_BYTES_PER_PARAM = 28


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The dense peak for ``precision`` ('fp32' or 'bf16') on a device, or None when unknown (CPUs).
    ``precision='hbm_tbps'`` reads the bandwidth column instead (``peak_hbm_tbps``)."""
    for key, peaks in PEAK_TFLOPS:
        if key in device_name:
            return peaks[precision]
    return None


def peak_hbm_tbps(device_name: str) -> float | None:
    """The device's HBM bandwidth in TB/s, or None when unknown (CPUs)."""
    return peak_tflops(device_name, "hbm_tbps")


def forward_flops(cfg: ModelConfig, batch_size: int, seq_len: int) -> int:
    """FLOPs of one forward pass, counting multiply-adds as 2.

    2 * N_mm * B * T for the weight matmuls (N_mm: matmul weights incl. the LM head, see
    ``matmul_parameters``), plus 4 * L * B * T^2 * d_model for attention's two T x T products
    (QK^T and PV), counted in full because naive attention computes the masked half too.
    Norms, softmax, RoPE and the loss are O(B T d) and left out, as is customary.
    """
    tokens = batch_size * seq_len
    weights = 2 * matmul_parameters(cfg) * tokens
    attention = 4 * cfg.num_layers * batch_size * seq_len**2 * cfg.d_model
    return weights + attention


def step_flops(cfg: ModelConfig, batch_size: int, seq_len: int, mode: str) -> int:
    """Forward = F; backward = 2F (gradients w.r.t. inputs and weights); a train step adds AdamW's O(N).

    So a train step is 3F = 6 * N_mm * tokens + 12 * L * B * T^2 * d_model, the usual 6N rule plus
    the attention term. The optimizer's ~10 FLOPs per parameter are negligible and not counted.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
    return forward_flops(cfg, batch_size, seq_len) * (1 if mode == "forward" else 3)
