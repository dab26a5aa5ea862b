"""The step every study runs, built in one place: model, batch, autocast, loss, backward, optimizer.

As torchtitan keeps the model, its parallelism and the training loop apart, the model lives in
lmperf.model, data parallelism in lmperf.distributed, and the step here: e2e and warm-up time it,
profiling traces it, memory records it and DDP wraps it. How the model runs (compiled, which
attention) is decided here too, not in the model.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

from lmperf import grid
from lmperf.attention import get_attention
from lmperf.measure.phases import phase
from lmperf.model import TransformerLM, cross_entropy, model_config
from lmperf.ranges import profiled_range
from lmperf.recompiles import allow_recompiles

PRECISIONS, MODES = grid.PRECISIONS, grid.MODES

Phase = Callable[[str], AbstractContextManager]


def autocast_context(precision: str, device: torch.device) -> AbstractContextManager:
    """bf16 autocast, or a no-op context for full fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


@phase("build")
def build_model(
    size: str, context_length: int, device: torch.device, attention: str = "naive", seed: int = 0
) -> TransformerLM:
    """The handout's model of ``size`` with room for ``context_length``, initialized from ``seed``."""
    torch.manual_seed(seed)
    return TransformerLM(model_config(size, context_length), attention=get_attention(attention), device=device)


def random_batch(
    vocab_size: int, batch_size: int, context_length: int, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and targets of shape (batch, context), the same for a given seed."""
    generator = torch.Generator().manual_seed(seed)
    tokens, targets = (
        torch.randint(0, vocab_size, (batch_size, context_length), generator=generator) for _ in range(2)
    )
    return tokens.to(device), targets.to(device)


def use_attention(model: TransformerLM, attention: str) -> None:
    """Swap the attention of every layer, so variants share one model (weights, optimizer state)."""
    function = get_attention(attention)
    for block in model.layers:
        block.attn.attention = function


def compile_blocks(model: torch.nn.Module) -> None:
    """Compile each Transformer block of ``model.layers`` in place (regional compilation).

    The blocks share one code object, so torch.compile traces one block and reuses it for all
    layers: compile time stays that of one block instead of growing with depth, which is what
    makes a compiled 48-layer grid affordable. Embedding, final norm and LM head stay eager.
    Shapes are static (dynamic=False): each context length gets its own specialized kernels; each
    attention variant and grad mode its own graph, hence the raised recompile limits.
    """
    allow_recompiles()
    for block in model.layers:
        block.compile(dynamic=False)


def make_step(
    mode: str,
    model: torch.nn.Module,
    optimizer,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    precision: str,
    device: torch.device,
    phase: Phase = profiled_range,
    after_backward: Callable[[], None] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = cross_entropy,
) -> Callable[[], None]:
    """The work of one step of ``mode``; 'forward' is inference (no autograd graph kept).

    ``phase(name)`` wraps the forward, backward and optimizer phases: profiler ranges by default,
    the memory study's phase boundaries there. ``after_backward`` runs between backward and the
    optimizer step (data parallelism waits for its gradient all-reduce there). ``loss_fn(logits,
    targets)`` is the model's cross-entropy unless a study brings its own kernel. ``model`` may be a
    DDP wrapper; ``optimizer`` holds the underlying parameters.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")

    def forward_and_loss() -> torch.Tensor:
        with autocast_context(precision, device), phase("forward"):
            return loss_fn(model(tokens), targets)

    def forward() -> None:
        with torch.no_grad(), autocast_context(precision, device), phase("forward"):
            model(tokens)

    def forward_backward() -> None:
        model.zero_grad(set_to_none=True)
        loss = forward_and_loss()
        with phase("backward"):
            loss.backward()

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = forward_and_loss()
        with phase("backward"):
            loss.backward()
        if after_backward is not None:
            after_backward()
        with phase("optimizer step"):
            optimizer.step()

    return {"forward": forward, "forward_backward": forward_backward, "train_step": train_step}[mode]
