"""The model sizes of the CS336 Assignment 2 handout, plus tiny ones that run on a CPU in seconds."""

from lmperf import grid
from lmperf.model.transformer import ModelConfig

VOCAB_SIZE = 10_000
BATCH_SIZE = 4

# name: (d_model, d_ff, num_layers, num_heads)
SIZES: dict[str, tuple[int, int, int, int]] = {
    "nano": (32, 128, 2, 2),
    "tiny": (64, 256, 2, 4),
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7B": (2560, 10240, 32, 32),
}
if tuple(SIZES) != grid.SIZES:  # the shapes of exactly the sizes a grid may name, in its order
    raise ImportError(f"lmperf.model.SIZES names {list(SIZES)}, lmperf.grid.SIZES {list(grid.SIZES)}")


def model_config(size: str, context_length: int, vocab_size: int = VOCAB_SIZE) -> ModelConfig:
    """The ModelConfig of a named size; an unknown name raises a KeyError that lists the known ones."""
    if size not in SIZES:
        raise KeyError(f"unknown model size {size!r}; known sizes: {', '.join(SIZES)}")
    d_model, d_ff, num_layers, num_heads = SIZES[size]
    return ModelConfig(
        vocab_size=vocab_size,
        context_length=context_length,
        d_model=d_model,
        d_ff=d_ff,
        num_layers=num_layers,
        num_heads=num_heads,
    )
