# Batch size: per model size, one process times the train step launched and graphed at batch 1, 2,
# 4, ... until a batch does not fit. An empty batch.sizes leaves the study out.

BATCH = GRID["batch"]
BATCH_TARGETS = expand("results/batch/{size}.csv", size=BATCH["sizes"])


rule batch:
    input:
        code("lmperf.studies.batch", *attention_modules([BATCH["attention"]])),
    output:
        "results/batch/{size}.csv",
    log:
        "logs/batch/{size}.log",
    benchmark:
        "benchmarks/batch/{size}.tsv"
    resources:
        **cluster("batch"),
        device=1,
    params:
        device=DEVICE,
        compile_flag="--compile" if BATCH["compile"] == "compiled" else "",
        context_length=BATCH["context_length"],
        batch_sizes=",".join(map(str, BATCH["batch_sizes"])),
        precision=BATCH["precision"],
        attention=BATCH["attention"],
        warmup_steps=BATCH["warmup_steps"],
        measured_steps=BATCH["measured_steps"],
        ci_halfwidth=BATCH["ci_halfwidth"],
        max_seconds=BATCH["max_seconds_per_point"],
        settle_seconds=BATCH["settle_seconds"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.batch --device {params.device} --size {wildcards.size} --context-length {params.context_length}"
        " --batch-sizes {params.batch_sizes} --precision {params.precision} {params.compile_flag}"
        " --attention {params.attention} --warmup-steps {params.warmup_steps}"
        " --measured-steps {params.measured_steps} --ci-halfwidth {params.ci_halfwidth}"
        " --max-seconds {params.max_seconds} --settle-seconds {params.settle_seconds} --out {output} > {log} 2>&1"


rule batch_figures:
    input:
        batch="results/batch.csv",
        code=code("lmperf.report.batch_section"),
    output:
        figure("batch_host_overhead"),
    log:
        "logs/figures/batch.log",
    shell:
        "python -m lmperf.report.batch_section --batch {input.batch} --out {output} > {log} 2>&1"
