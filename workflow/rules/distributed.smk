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
