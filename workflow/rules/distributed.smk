# Communication: the all-reduce sweep, one target per (backend, world size), launched with torchrun.
# The process count comes from the config (the target name), never from Snakemake's resources,
# which a local run may scale down.

ALLREDUCE = GRID["allreduce"]
ALLREDUCE_TARGETS = [
    f"results/allreduce/{backend}-n{n}.csv"
    for backend in ("gloo", "nccl")
    for n in ALLREDUCE[f"{backend}_world_sizes"]
]


rule allreduce:
    input:
        code("measure", "studies/allreduce.py"),
    output:
        "results/allreduce/{backend}-n{world}.csv",
    log:
        "logs/allreduce/{backend}-n{world}.log",
    wildcard_constraints:
        backend="gloo|nccl",
        world=r"\d+",
    params:
        sizes_mb=",".join(map(str, ALLREDUCE["sizes_mb"])),
        warmup=ALLREDUCE["warmup"],
        iters=ALLREDUCE["iters"],
    resources:
        gpu=lambda wc: int(wc.world) if wc.backend == "nccl" else 1,
    shell:
        "{PYTHON} -m torch.distributed.run --standalone --nproc_per_node={wildcards.world}"
        " -m lmperf.studies.allreduce --backend {wildcards.backend} --sizes-mb {params.sizes_mb}"
        " --warmup {params.warmup} --iters {params.iters} --out {output} > {log} 2>&1"


# Data-parallel training: the DDP variants side by side, optimizer state sharding, a kernel timeline.
# One torchrun task of world_size ranks each; on a machine with fewer GPUs the ranks fall back to
# gloo on CPU processes (the smoke grid's tiny model), and the rows say which backend ran.
DDP = GRID["ddp"]
DDP_TRAIN_TARGETS = expand("results/ddp/train-b{batch}.csv", batch=DDP["global_batches"])
DDP_CODE = code("distributed", "measure", "model", "training.py", "attention/__init__.py", "attention/naive.py", "studies/ddp.py")
DDP_ARGS = (f"--size {DDP['size']} --context-length {DDP['context_length']} --warmup {DDP['warmup']}"
            f" --steps {DDP['steps']}")
TORCHRUN = f"{PYTHON} -m torch.distributed.run --standalone --nproc_per_node={DDP['world_size']} -m lmperf.studies.ddp"


rule ddp_train:
    input:
        DDP_CODE,
    output:
        "results/ddp/train-b{batch}.csv",
    log:
        "logs/ddp/train-b{batch}.log",
    wildcard_constraints:
        batch=r"\d+",
    params:
        variants=",".join(DDP["variants"]),
    resources:
        gpu=DDP["world_size"],
    shell:
        "{TORCHRUN} train {DDP_ARGS} --global-batch {wildcards.batch} --variants {params.variants}"
        " --out {output} > {log} 2>&1"


rule ddp_sharding:
    input:
        DDP_CODE,
    output:
        "results/ddp/sharding.csv",
    log:
        "logs/ddp/sharding.log",
    params:
        batch=min(DDP["global_batches"]),
    resources:
        gpu=DDP["world_size"],
    shell:
        "{TORCHRUN} sharding {DDP_ARGS} --global-batch {params.batch} --out {output} > {log} 2>&1"


rule ddp_timeline:
    input:
        DDP_CODE,
    output:
        "results/ddp/timeline.csv",
    log:
        "logs/ddp/timeline.log",
    params:
        batch=min(DDP["global_batches"]),
        variants=",".join(DDP["timeline_variants"]),
    resources:
        gpu=DDP["world_size"],
    shell:
        "{TORCHRUN} timeline {DDP_ARGS} --global-batch {params.batch} --variants {params.variants}"
        " --out {output} > {log} 2>&1"
