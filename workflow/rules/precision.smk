# Mixed-precision demos that need no big model (they do not rerun when the Transformer changes).

PRECISION_TARGETS = expand("results/precision/{experiment}.csv", experiment=grid.PRECISION_EXPERIMENTS)


rule precision:
    input:
        code("lmperf.studies.precision"),
    output:
        "results/precision/{experiment}.csv",
    log:
        "logs/precision/{experiment}.log",
    benchmark:
        "benchmarks/precision/{experiment}.tsv"
    wildcard_constraints:
        experiment=alternatives(grid.PRECISION_EXPERIMENTS),
    resources:
        **cluster("precision"),
        device=1,
    params:
        device=DEVICE,
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.precision {wildcards.experiment} --out {output} > {log} 2>&1"
