# Communication: the all-reduce sweep, one target per (backend, world size), launched with torchrun,
# and the fit of time = o + bytes/w to it. The process count comes from the config (the target
# name), never from Snakemake's resources, which a local run may scale down.

ALLREDUCE = GRID["allreduce"]
ALLREDUCE_RUNS = [(backend, n) for backend in ("gloo", "nccl") for n in ALLREDUCE[f"{backend}_world_sizes"]]
ALLREDUCE_TARGETS = [f"results/allreduce/{backend}-n{n}.csv" for backend, n in ALLREDUCE_RUNS]
ALLREDUCE_JOBS = {target: allreduce_gpus(*run) for target, run in zip(ALLREDUCE_TARGETS, ALLREDUCE_RUNS)}


rule allreduce:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.allreduce"),
    output:
        "results/allreduce/{backend}-n{world}.csv",
    log:
        "logs/allreduce/{backend}-n{world}.log",
    benchmark:
        "benchmarks/allreduce/{backend}-n{world}.tsv"
    wildcard_constraints:
        backend="gloo|nccl",
        world=r"\d+",
    resources:
        **cluster("allreduce"),
        device=lambda wc: devices(allreduce_gpus(wc.backend, wc.world)),
    params:
        device=DEVICE,
        min_bytes=ALLREDUCE["min_bytes"],
        max_bytes=lambda wc: ALLREDUCE["max_bytes"] if wc.backend == "nccl" else ALLREDUCE["gloo_max_bytes"],
        step_factor=ALLREDUCE["step_factor"],
        warmup=ALLREDUCE["warmup"],
        iters=ALLREDUCE["iters"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.distributed.torchrun --ranks {wildcards.world}"
        " lmperf.studies.allreduce --backend {wildcards.backend} --min-bytes {params.min_bytes}"
        " --max-bytes {params.max_bytes} --step-factor {params.step_factor}"
        " --warmup {params.warmup} --iters {params.iters} --out {output} > {log} 2>&1"


rule comm_fit:
    input:
        allreduce="results/allreduce.csv",
        code=code("lmperf.distributed.bucket_model"),
    output:
        "results/comm_fit.csv",
    log:
        "logs/comm_fit.log",
    shell:
        "python -m lmperf.distributed.bucket_model --allreduce {input.allreduce} --out {output} > {log} 2>&1"


# Data-parallel training: the DDP variants side by side, optimizer state sharding, a kernel timeline.
# One torchrun task of world_size ranks each; on a machine with fewer GPUs the ranks fall back to
# gloo on CPU processes (the smoke grid's tiny model), and the rows say which backend ran.
DDP = GRID["ddp"]
DDP_TRAIN_TARGETS = expand("results/ddp/train-b{batch}.csv", batch=DDP["global_batches"])
DDP_TARGETS = DDP_TRAIN_TARGETS + ["results/ddp/sharding.csv", "results/ddp/timeline.csv"]
DDP_JOBS = dict.fromkeys(DDP_TARGETS, DDP["world_size"])  # a GPU per rank
# Every ddp.* key the three rules share, as params: an edit reruns them (Snakemake's params trigger).
DDP_PARAMS = {
    "world": DDP["world_size"],
    "size": DDP["size"],
    "ctx": DDP["context_length"],
    "warmup": DDP["warmup"],
    "steps": DDP["steps"],
    "max_seconds": DDP["max_seconds"],
}


rule ddp_train:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/train-b{batch}.csv",
    log:
        "logs/ddp/train-b{batch}.log",
    benchmark:
        "benchmarks/ddp/train-b{batch}.tsv"
    wildcard_constraints:
        batch=r"\d+",
    resources:
        **cluster("ddp_train", gpu=DDP["world_size"]),
        device=devices(DDP["world_size"]),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        variants=",".join(DDP["variants"]),
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.distributed.torchrun --ranks {params.world} lmperf.studies.ddp train"
        " --size {params.size} --context-length {params.ctx} --warmup {params.warmup} --steps {params.steps}"
        " --max-seconds {params.max_seconds} --global-batch {wildcards.batch} --variants {params.variants}"
        " --out {output} > {log} 2>&1"


rule ddp_sharding:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/sharding.csv",
    log:
        "logs/ddp/sharding.log",
    benchmark:
        "benchmarks/ddp/sharding.tsv"
    resources:
        **cluster("ddp_sharding", gpu=DDP["world_size"]),
        device=devices(DDP["world_size"]),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        batch=min(DDP["global_batches"]),
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.distributed.torchrun --ranks {params.world} lmperf.studies.ddp sharding"
        " --size {params.size} --context-length {params.ctx} --warmup {params.warmup} --steps {params.steps}"
        " --max-seconds {params.max_seconds} --global-batch {params.batch} --out {output} > {log} 2>&1"


rule ddp_timeline:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/timeline.csv",
    log:
        "logs/ddp/timeline.log",
    benchmark:
        "benchmarks/ddp/timeline.tsv"
    resources:
        **cluster("ddp_timeline", gpu=DDP["world_size"]),
        device=devices(DDP["world_size"]),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        batch=min(DDP["global_batches"]),
        variants=",".join(DDP["timeline_variants"]),
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.distributed.torchrun --ranks {params.world} lmperf.studies.ddp timeline"
        " --size {params.size} --context-length {params.ctx} --warmup {params.warmup} --steps {params.steps}"
        " --max-seconds {params.max_seconds} --global-batch {params.batch} --variants {params.variants}"
        " --out {output} > {log} 2>&1"
