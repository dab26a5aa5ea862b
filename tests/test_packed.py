"""Packed projections (lmperf.model.packed): one product by [Wq; Wk; Wv] and one by [W1; W3] compute
what the model's separate products do, in float64, and each projection's gradient lands in its own
Parameter as rows of one gradient."""

import pytest
import torch
import torch.nn.functional as F

from lmperf.model.fused_rmsnorm import FusedNormsLM
from lmperf.model.packed import PackedLM, joined, packed_copies, packed_groups
from lmperf.model.transformer import Linear
from lmperf.training import build_model, random_batch


def test_joined_hands_each_part_its_rows_of_the_gradient():
    torch.manual_seed(0)
    weights = [torch.randn(rows, 6, dtype=torch.float64) for rows in (4, 4, 5)]
    parts = packed_copies(weights + [torch.randn(3, 6, dtype=torch.float64)], [[0, 1, 2]], torch.float64)
    alone = [w.clone().requires_grad_() for w in weights]
    x, dy = torch.randn(7, 6, dtype=torch.float64), torch.randn(7, 13, dtype=torch.float64)
    F.linear(x, joined(parts[:3])).backward(dy)
    torch.cat([F.linear(x, w) for w in alone], dim=-1).backward(dy)
    for part, reference in zip(parts, alone):
        assert torch.allclose(part.grad, reference.grad, rtol=1e-12, atol=1e-12)
    grads = [p.grad for p in parts[:3]]  # views of one gradient, in row order: no copy
    assert [g.data_ptr() - grads[0].data_ptr() for g in grads] == [0, 4 * 6 * 8, 8 * 6 * 8]
    assert parts[3].untyped_storage().data_ptr() != parts[0].untyped_storage().data_ptr()


def test_joined_refuses_parts_that_are_not_rows_of_one_tensor():
    parts = packed_copies([torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3)], [[0, 1, 2]], torch.float32)
    with pytest.raises(ValueError, match="not consecutive rows"):
        joined([parts[0], parts[2]])
    with pytest.raises(ValueError, match="make them with packed_copies"):
        joined([torch.ones(2, 3), torch.ones(2, 3)])


def test_packed_lm_computes_the_fused_norms_model_in_float64():
    """The same model (its Linear weights made packed copies, in float64) through PackedLM and
    FusedNormsLM: the same logits and the same gradient of every weight, to float64's rounding of
    different product shapes. The norm kernels (the interpreter on a CPU) are the same in both."""
    model = build_model("nano", 16, torch.device("cpu")).double()
    linears = [m for m in model.modules() if isinstance(m, Linear)]
    at = {id(linear): i for i, linear in enumerate(linears)}
    groups = [[at[id(m)] for m in group] for block in model.layers for group in packed_groups(block)]
    for linear, weight in zip(linears, packed_copies([m.weight for m in linears], groups, torch.float64)):
        linear.weight = weight
    tokens, _ = random_batch(model.cfg.vocab_size, 2, 16, torch.device("cpu"))
    results = []
    for lm in (FusedNormsLM(model), PackedLM(model)):
        model.zero_grad(set_to_none=True)
        logits = lm(tokens)
        logits.pow(2).mean().backward()
        results.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    (fused, fused_grads), (packed, packed_grads) = results
    assert fused.dtype == torch.float64 and torch.allclose(packed, fused, rtol=1e-9, atol=1e-9)
    for mine, reference in zip(packed_grads, fused_grads, strict=True):
        assert torch.allclose(mine, reference, rtol=1e-7, atol=1e-9)
