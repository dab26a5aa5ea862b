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


# Data-parallel training: the DDP variants side by side, optimizer state sharding, a kernel timeline,
# each at every world size. One torchrun task of that many ranks each: on CUDA one GPU per rank (fewer
# visible: a skipped row), on a CPU gloo processes (the smoke grid's tiny model); rows say the backend.
DDP = GRID["ddp"]
DDP_TRAIN_TARGETS = expand(
    "results/ddp/train-n{world}-b{batch}.csv", world=DDP["world_sizes"], batch=DDP["global_batches"]
)
DDP_SHARDING_TARGETS = expand("results/ddp/sharding-n{world}.csv", world=DDP["world_sizes"])
DDP_TIMELINE_TARGETS = expand("results/ddp/timeline-n{world}.csv", world=DDP["world_sizes"])
DDP_JOBS = {  # a GPU per rank
    target: int(re.search(r"-n(\d+)", target).group(1))
    for target in [*DDP_TRAIN_TARGETS, *DDP_SHARDING_TARGETS, *DDP_TIMELINE_TARGETS]
}
# Every ddp.* key the three rules share, as params: an edit reruns them (Snakemake's params trigger).
DDP_PARAMS = {
    "size": DDP["size"],
    "ctx": DDP["context_length"],
    "warmup": DDP["warmup"],
    "steps": DDP["steps"],
    "max_seconds": DDP["max_seconds"],
}
DDP_COMMAND = (
    "python -m lmperf.gpu_slots {resources.device} -- "
    "python -m lmperf.distributed.torchrun --ranks {wildcards.world} lmperf.studies.ddp"
)
DDP_ARGS = (
    " --device {params.device} --size {params.size} --context-length {params.ctx} --warmup {params.warmup}"
    " --steps {params.steps} --max-seconds {params.max_seconds}"
)


rule ddp_train:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/train-n{world}-b{batch}.csv",
    log:
        "logs/ddp/train-n{world}-b{batch}.log",
    benchmark:
        "benchmarks/ddp/train-n{world}-b{batch}.tsv"
    wildcard_constraints:
        world=r"\d+",
        batch=r"\d+",
    resources:
        **cluster("ddp_train"),
        device=lambda wc: devices(int(wc.world)),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        variants=",".join(DDP["variants"]),
        model_factor=DDP["bucket_model_factor"],
    shell:
        f"{DDP_COMMAND} train{DDP_ARGS}"
        " --global-batch {wildcards.batch} --variants {params.variants}"
        " --bucket-model-factor {params.model_factor} --out {output} > {log} 2>&1"


rule ddp_sharding:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/sharding-n{world}.csv",
    log:
        "logs/ddp/sharding-n{world}.log",
    benchmark:
        "benchmarks/ddp/sharding-n{world}.tsv"
    wildcard_constraints:
        world=r"\d+",
    resources:
        **cluster("ddp_sharding"),
        device=lambda wc: devices(int(wc.world)),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        batch=min(DDP["global_batches"]),
        saved_share=DDP["sharding_saved_share"],
    shell:
        f"{DDP_COMMAND} sharding{DDP_ARGS}"
        " --global-batch {params.batch}"
        " --sharding-saved-share {params.saved_share} --out {output} > {log} 2>&1"


rule ddp_timeline:
    input:
        code("lmperf.distributed.torchrun", "lmperf.studies.ddp"),
    output:
        "results/ddp/timeline-n{world}.csv",
    log:
        "logs/ddp/timeline-n{world}.log",
    benchmark:
        "benchmarks/ddp/timeline-n{world}.tsv"
    wildcard_constraints:
        world=r"\d+",
    resources:
        **cluster("ddp_timeline"),
        device=lambda wc: devices(int(wc.world)),
    params:
        **DDP_PARAMS,
        device=DEVICE,
        batch=min(DDP["global_batches"]),
        variants=",".join(DDP["timeline_variants"]),
    shell:
        f"{DDP_COMMAND} timeline{DDP_ARGS}"
        " --global-batch {params.batch} --variants {params.variants}"
        " --out {output} > {log} 2>&1"
