"""lmperf's own kernels, each in the language it is written in, beside the PyTorch reference it replaces.

FlashAttention-2 (the model's ``flash_triton`` attention, ``FlashAttentionTriton``):

- ``flash_attention``: the portable Triton kernels, forward and a deterministic backward, and the
  autograd Function that picks a pass's kernel per input signature: the Gluon kernels below where
  they take the inputs on an sm_90 GPU, these elsewhere (``forward_kernel`` and ``backward_kernel``
  decide, ``ran()`` says what the last calls ran, and result rows name it as ``attention_kernel``);
- ``flash_attention_gluon``: the Hopper forward in Gluon (Triton's lower-level language), and the
  TMA addressing the backward shares;
- ``flash_attention_gluon_backward``: the Hopper backward in Gluon, five products;
- ``flash_attention_pytorch``: the same algorithm tiled in plain PyTorch (``FlashAttentionPyTorch``);
- ``triton_launcher``: a compiled Triton or Gluon kernel launched without Triton's per-call work.

Fused kernels of the train step, in Triton: ``fused_adamw`` (AdamW in one pass, the optimizer
``lmperf_fused``), ``fused_rmsnorm`` (RMSNorm with the residual add, ``FusedNormsLM``) and
``fused_cross_entropy`` (the loss in one pass each way).

Importing this package imports nothing: each module imports triton, so a caller imports a kernel
module where it runs one.
"""
