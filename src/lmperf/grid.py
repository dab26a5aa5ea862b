"""The names a grid can hold, each list written once: the studies, the Snakemake rules, the config schema
and the report read them here. No torch: the workflow imports this module to build its DAG in seconds.

The code that runs a name keys its table by these lists (lmperf.attention.ATTENTION,
lmperf.studies.ddp's wrappers, ...) and refuses a name it does not know.
"""

# Model sizes, smallest first: the CPU sizes, then the handout's (lmperf.model.sizes holds their shapes).
SIZES = ("nano", "tiny", "small", "medium", "large", "xl", "2.7B")
PRECISIONS = ("fp32", "bf16")  # fp32, or bf16 autocast
MODES = ("forward", "forward_backward", "train_step")  # what one timed step runs
PROFILED_MODES = ("forward", "train_step")  # the modes profiling and memory record
COMPILE_MODES = ("eager", "compiled")  # the Transformer blocks as written, or torch.compile'd
ATTENTIONS = ("naive", "annotated", "flash_triton", "flash_pytorch", "sdpa")
OPTIMIZERS = ("lmperf", "lmperf_fused", "torch_fused")
DDP_VARIANTS = (  # local first, the anchor (torch's DDP) last: the report's order
    "local",
    "naive",
    "flat",
    "individual",
    "bucketed-1",
    "bucketed-10",
    "bucketed-100",
    "bucketed-1000",
    "bucketed-25-bf16",  # ours, buckets of torch DDP's default 25 MB, all-reduced in bf16
    "torch_ddp-bf16",  # torch DDP with torch's own bf16_compress_hook
    "torch_ddp",
)
PRECISION_EXPERIMENTS = ("accumulation", "autocast", "layernorm")
FLASH_IMPLEMENTATIONS = ("ours_triton", "ours_pytorch", "naive", "naive_compiled", "sdpa_flash", "sdpa_cudnn", "fa4")
FLASH_DTYPES = ("bf16", "fp32")
