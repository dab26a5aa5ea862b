"""Our cross-entropy kernels (lmperf.kernels.fused_cross_entropy; the interpreter on a CPU) against the
loss in float64: the mean loss and the logits' gradient, for bf16 and fp32 logits, over a vocabulary
that ends inside a chunk, and with the loss scaled as a caller's backward would."""

import pytest
import torch

from lmperf.kernels.fused_cross_entropy import fused_cross_entropy
from lmperf.model.loss import cross_entropy


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_cross_entropy_matches_float64(dtype):
    torch.manual_seed(0)
    vocab = 2 * 4096 + 37  # chunks of 4096, 4096 and a masked 37
    logits = (4 * torch.randn(2, 3, vocab)).to(dtype)
    targets = torch.randint(0, vocab, (2, 3))
    targets[0, 0] = vocab - 1  # a target in the last, masked chunk
    exact = logits.double().requires_grad_()
    reference = torch.nn.functional.cross_entropy(exact.reshape(-1, vocab), targets.reshape(-1))
    (3 * reference).backward()
    ours = logits.clone().requires_grad_()
    loss = fused_cross_entropy(ours, targets)
    (3 * loss).backward()
    assert loss.dtype == torch.float32 and abs(loss.item() - reference.item()) < 1e-5 * reference.item()
    assert ours.grad.dtype == dtype and ours.grad.shape == logits.shape
    error = (ours.grad.double() - exact.grad).abs()
    if dtype == torch.bfloat16:  # one bf16 rounding: to nearest on a GPU, toward zero in the interpreter
        assert (error <= exact.grad.abs() * 2**-7 + 1e-7).all()
    else:
        assert error.max() < 1e-6


def test_fused_cross_entropy_is_the_models_loss():
    torch.manual_seed(1)
    logits, targets = torch.randn(4, 5, 50), torch.randint(0, 50, (4, 5))
    assert torch.allclose(fused_cross_entropy(logits, targets), cross_entropy(logits, targets), rtol=1e-6)
