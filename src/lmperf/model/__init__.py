"""The Transformer LM, its optimizer and loss, and the size table."""

from lmperf.model.loss import cross_entropy
from lmperf.model.optim import OPTIMIZERS, AdamW, make_optimizer, repeated_batch_lr
from lmperf.model.sizes import BATCH_SIZE, SIZES, VOCAB_SIZE, model_config
from lmperf.model.transformer import ModelConfig, TransformerLM, count_parameters, matmul_parameters

__all__ = [
    "AdamW",
    "BATCH_SIZE",
    "ModelConfig",
    "OPTIMIZERS",
    "SIZES",
    "TransformerLM",
    "VOCAB_SIZE",
    "count_parameters",
    "cross_entropy",
    "make_optimizer",
    "matmul_parameters",
    "model_config",
    "repeated_batch_lr",
]
