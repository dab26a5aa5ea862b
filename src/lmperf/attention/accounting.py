"""What naive attention keeps alive for backward, computed from shapes and observed through autograd.

For softmax(q k^T / sqrt(d)) v with q, k, v of shape (batch, seq, d), autograd saves the inputs,
three (batch, seq, seq) tensors — the scaled scores (amax's backward needs them), exp(scores - max)
(exp's backward reuses its result; the division keeps it as numerator) and P (the product with v
needs it) — and two (batch, seq, 1) row statistics (the max and the sum). The seq^2 terms are what
FlashAttention removes: it keeps only the (batch, seq) logsumexp and recomputes P tile by tile.
"""

import torch


def naive_attention_saved_bytes(batch: int, seq: int, d: int, element_bytes: int = 4) -> dict[str, int]:
    """Bytes of each tensor naive attention saves for backward (non-causal, our implementation)."""
    vector, square, row = batch * seq * d, batch * seq * seq, batch * seq
    parts = {
        "q": vector,
        "k": vector,
        "v": vector,
        "scores": square,
        "exp": square,
        "P": square,
        "row max": row,
        "row sum": row,
    }
    return {name: n * element_bytes for name, n in parts.items()}


def observed_saved_bytes(fn, *inputs) -> int:
    """Bytes of the distinct storages autograd saves while running fn(*inputs)."""
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*inputs)
    return sum(storages.values())
