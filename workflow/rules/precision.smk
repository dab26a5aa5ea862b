# Mixed-precision demos that need no model (they do not rerun when the model changes).


rule accumulation:
    input:
        code("measure", "studies/precision.py"),
    output:
        "results/precision/accumulation.csv",
    log:
        "logs/precision/accumulation.log",
    shell:
        "{PYTHON} -m lmperf.studies.precision accumulation --out {output} > {log} 2>&1"
