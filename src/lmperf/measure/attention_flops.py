"""FlashAttention's FLOP convention, the leaderboard's: what the flash study's TFLOP/s count.

Why a module of its own: the flash study and the report's flash section both need it, and neither
should depend on the model (lmperf.measure.flops imports it), so that editing the model does not
rerun the flash targets.
"""

# The forward's two products, 4 batch seq^2 d FLOPs, halved when causal; the backward (five
# products, the recomputation of S and P not counted) 2.5x the forward.
ATTENTION_PASS_FLOPS = {"forward": 1.0, "backward": 2.5, "forward_backward": 3.5}


def attention_flops(batch: int, seq: int, d: int, causal: bool, pass_: str) -> float:
    """FLOPs of one attention pass over (batch, seq, d) inputs, by the leaderboard's convention."""
    forward = 4 * batch * seq * seq * d / (2 if causal else 1)
    return forward * ATTENTION_PASS_FLOPS[pass_]
