# Aggregate the per-target CSVs, draw the figures, tally what the run cost, render report/final.md.
# Figures and the report are report() outputs: `snakemake --report report/lmperf.zip report/final.md`.

# Every list below is read from the studies' declarations (lmperf.registry) and their rule files' target lists.


SKIPPED = [study for study in STUDIES.values() if left_out(study)]
RUN = [study for study in STUDIES.values() if study not in SKIPPED]
SKIPPED_STUDIES = " ".join(f"--skip {study.name}" for study in SKIPPED)
AGGREGATES = {result: targets(name) for study in RUN for result, name in study.aggregates.items()}

# Every measuring job's output -> the GPUs it uses (a list in a declaration: one GPU a job), and its
# benchmark file (benchmarks/ mirrors results/).
JOB_GPUS = {
    target: gpus
    for study in RUN
    for name in study.jobs
    for target, gpus in (
        targets(name).items() if isinstance(targets(name), dict) else dict.fromkeys(targets(name), 1).items()
    )
}
BENCHMARK_GPUS = {
    f"benchmarks/{target.removeprefix('results/').removesuffix('.csv')}.tsv": gpus for target, gpus in JOB_GPUS.items()
}
GPU_COUNTS = ",".join(map(str, BENCHMARK_GPUS.values()))  # one per benchmark file, for the scripts' --gpus


# What the report reads: each section's results, and every figure, of the studies this grid runs.
REPORT_INPUTS = sorted({f"results/{name}.csv" for study in RUN if study.section for name in study.reads})
REPORT_FIGURES = [path for study in RUN for path in drawn_figures(study)]
SECTIONS = [f"lmperf.report.{study.section}" for study in STUDIES.values() if study.section]


rule aggregate:
    input:
        csvs=lambda wc: AGGREGATES[wc.study],
        code=code("lmperf.report.aggregate"),
    output:
        "results/{study}.csv",
    log:
        "logs/aggregate/{study}.log",
    wildcard_constraints:
        study=alternatives(AGGREGATES),
    shell:
        "python -m lmperf.report.aggregate --out {output} {input.csvs} > {log} 2>&1"


rule cost:
    input:
        benchmarks=list(BENCHMARK_GPUS),
        code=code("lmperf.report.cost"),
    output:
        "results/cost.csv",
    log:
        "logs/cost.log",
    params:
        gpus=GPU_COUNTS,
    shell:
        "python -m lmperf.report.cost --gpus {params.gpus} --out {output} {input.benchmarks} > {log} 2>&1"


rule jobs:
    input:
        code=code("lmperf.report.projection"),
    output:
        "results/jobs.csv",
    log:
        "logs/jobs.log",
    params:
        gpus=GPU_COUNTS,
        benchmarks=list(BENCHMARK_GPUS),
    shell:
        "python -m lmperf.report.projection jobs --gpus {params.gpus} --out {output} {params.benchmarks} > {log} 2>&1"


rule e2e_figures:
    input:
        e2e="results/e2e.csv",
        warmup="results/warmup.csv",
        code=code("lmperf.report.e2e_figures"),
    output:
        *[figure(name) for name in STUDIES["e2e"].figures],
    log:
        "logs/figures/e2e.log",
    shell:
        "python -m lmperf.report.e2e_figures --e2e {input.e2e} --warmup {input.warmup}"
        " --outdir report/figures > {log} 2>&1"


rule flash_figures:
    input:
        sweep="results/flash_sweep.csv",
        code=code("lmperf.report.flash_figures"),
    output:
        figure("flash_tflops"),
    log:
        "logs/figures/flash.log",
    shell:
        "python -m lmperf.report.flash_figures --sweep {input.sweep} --out {output} > {log} 2>&1"


rule attention_figures:
    input:
        attention="results/attention.csv",
        code=code("lmperf.report.attention_figures"),
    output:
        figure("attention_sweep"),
    log:
        "logs/figures/attention.log",
    shell:
        "python -m lmperf.report.attention_figures --attention {input.attention} --out {output} > {log} 2>&1"


rule comm_figures:
    input:
        allreduce="results/allreduce.csv",
        code=code("lmperf.report.comm_figures"),
    output:
        figure("allreduce_busbw"),
    log:
        "logs/figures/comm.log",
    shell:
        "python -m lmperf.report.comm_figures --allreduce {input.allreduce} --out {output} > {log} 2>&1"


rule ddp_figures:
    input:
        timeline="results/ddp/timeline.csv",
        code=code("lmperf.report.ddp_figures"),
    output:
        figure("ddp_timeline"),
    log:
        "logs/figures/ddp.log",
    shell:
        "python -m lmperf.report.ddp_figures --timeline {input.timeline} --out {output} > {log} 2>&1"


rule report:
    input:
        REPORT_INPUTS,
        REPORT_FIGURES,
        code=code("lmperf.report.render", *SECTIONS),
        published="src/lmperf/report/published/flash_attention_3.csv",
    output:
        report("report/final.md", caption="../report/final.rst", category="Report"),
    log:
        "logs/report.log",
    params:
        grid=GRID_NAME,
        skip=SKIPPED_STUDIES,
        missing=" ".join(f"--missing {target}" for target in EXCLUDED),
    shell:
        "python -m lmperf.report.render --grid {params.grid} {params.skip} {params.missing} --results results"
        " --figures report/figures --out {output} > {log} 2>&1"
