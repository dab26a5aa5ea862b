# Mixed-precision demos that need no big model (they do not rerun when the Transformer changes).


rule precision:
    input:
        code("measure", "studies/precision.py"),
    output:
        "results/precision/{experiment}.csv",
    log:
        "logs/precision/{experiment}.log",
    wildcard_constraints:
        experiment="accumulation|autocast|layernorm",
    resources:
        gpu=1,
    shell:
        "{PYTHON} -m lmperf.studies.precision {wildcards.experiment} --out {output} > {log} 2>&1"
