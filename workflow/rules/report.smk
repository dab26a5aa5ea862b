# Aggregate the per-target CSVs, draw the figures, tally what the run cost, render report/final.md.
# Figures and the report are report() outputs: `snakemake --report report/lmperf.zip report/final.md`.

AGGREGATES = {
    "e2e": E2E_TARGETS,
    "warmup": WARMUP_TARGETS,
    "flash_sweep": FLASH_SWEEP_TARGETS,
    "allreduce": ALLREDUCE_TARGETS,
    "attention": ATTENTION_SWEEP_TARGETS,
    "ddp_train": DDP_TRAIN_TARGETS,
}
if PROFILE_TARGETS:  # an empty profile.sizes leaves the study out
    AGGREGATES.update(profile=PROFILE_TARGETS, profile_timing=PROFILE_TIMING_TARGETS)
if LADDER_TARGETS:  # an empty ladder.sizes leaves the study out
    AGGREGATES.update(ladder=LADDER_TARGETS, ladder_kernels=LADDER_KERNEL_TARGETS)
if MEMORY_TARGETS:  # an empty memory.context_lengths leaves the study out
    AGGREGATES.update(memory=MEMORY_TARGETS, memory_allocations=MEMORY_ALLOCATION_TARGETS)
MEMORY_REPORT_INPUTS = (
    {
        "memory": "results/memory.csv",
        "memory_allocations": "results/memory_allocations.csv",
        "memory_figures": MEMORY_FIGURES,
    }
    if MEMORY_TARGETS
    else {}
)
LADDER_REPORT_INPUTS = (
    {
        "ladder": "results/ladder.csv",
        "ladder_kernels": "results/ladder_kernels.csv",
        "ladder_figure": "report/figures/ladder_waterfall.png",
    }
    if LADDER_TARGETS
    else {}
)
PROFILE_REPORT_INPUTS = (
    {"profile": "results/profile.csv", "profile_timing": "results/profile_timing.csv"} if PROFILE_TARGETS else {}
)
SKIPPED_STUDIES = " ".join(
    f"--skip {study}"
    for study, targets in (("memory", MEMORY_TARGETS), ("profile", PROFILE_TARGETS), ("ladder", LADDER_TARGETS))
    if not targets
)

# Every measuring job's benchmark file (benchmarks/ mirrors results/) and the GPUs the job uses.
ONE_GPU_TARGETS = (
    E2E_JOBS
    + LADDER_TIMED_TARGETS
    + LADDER_TARGETS
    + WARMUP_TARGETS
    + PRECISION_TARGETS
    + ["results/flash/leaderboard.csv"]
    + FLASH_SWEEP_TARGETS
    + ATTENTION_SWEEP_TARGETS
    + PROFILE_TARGETS
    + MEMORY_TARGETS
)
BENCHMARK_GPUS = {
    f"benchmarks/{target.removeprefix('results/').removesuffix('.csv')}.tsv": gpus
    for target, gpus in [
        *[(t, 1) for t in ONE_GPU_TARGETS],
        *[(t, allreduce_gpus(*run)) for t, run in zip(ALLREDUCE_TARGETS, ALLREDUCE_RUNS)],
        *[(t, DDP["world_size"]) for t in DDP_TARGETS],
    ]
}

# Figures drawn from one aggregate each: name -> caption and category in `snakemake --report`.
FIGURES = {
    "e2e_host_overhead": "End to end",
    "e2e_time_vs_size": "End to end",
    "e2e_backward_ratio": "End to end",
    "e2e_bf16_speedup": "End to end",
    "warmup_cv": "End to end",
    "flash_tflops": "FlashAttention",
    "attention_sweep": "Attention",
    "allreduce_busbw": "Communication",
    "ddp_timeline": "Data parallel",
}


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
        gpus=",".join(map(str, BENCHMARK_GPUS.values())),
    shell:
        "python -m lmperf.report.cost --gpus {params.gpus} --out {output} {input.benchmarks} > {log} 2>&1"


rule e2e_figures:
    input:
        e2e="results/e2e.csv",
        warmup="results/warmup.csv",
        code=code("lmperf.report.e2e_figures"),
    output:
        *[figure(name, FIGURES) for name in FIGURES if FIGURES[name] == "End to end"],
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
        figure("flash_tflops", FIGURES),
    log:
        "logs/figures/flash.log",
    shell:
        "python -m lmperf.report.flash_figures --sweep {input.sweep} --out {output} > {log} 2>&1"


rule attention_figures:
    input:
        attention="results/attention.csv",
        code=code("lmperf.report.attention_figures"),
    output:
        figure("attention_sweep", FIGURES),
    log:
        "logs/figures/attention.log",
    shell:
        "python -m lmperf.report.attention_figures --attention {input.attention} --out {output} > {log} 2>&1"


rule comm_figures:
    input:
        allreduce="results/allreduce.csv",
        code=code("lmperf.report.comm_figures"),
    output:
        figure("allreduce_busbw", FIGURES),
    log:
        "logs/figures/comm.log",
    shell:
        "python -m lmperf.report.comm_figures --allreduce {input.allreduce} --out {output} > {log} 2>&1"


rule ddp_figures:
    input:
        timeline="results/ddp/timeline.csv",
        code=code("lmperf.report.ddp_figures"),
    output:
        figure("ddp_timeline", FIGURES),
    log:
        "logs/figures/ddp.log",
    shell:
        "python -m lmperf.report.ddp_figures --timeline {input.timeline} --out {output} > {log} 2>&1"


rule report:
    input:
        **MEMORY_REPORT_INPUTS,
        **PROFILE_REPORT_INPUTS,
        **LADDER_REPORT_INPUTS,
        e2e="results/e2e.csv",
        warmup="results/warmup.csv",
        precision=PRECISION_TARGETS,
        leaderboard="results/flash/leaderboard.csv",
        flash_sweep="results/flash_sweep.csv",
        allreduce="results/allreduce.csv",
        comm_fit="results/comm_fit.csv",
        attention="results/attention.csv",
        ddp_train="results/ddp_train.csv",
        ddp_sharding="results/ddp/sharding.csv",
        ddp_timeline="results/ddp/timeline.csv",
        cost="results/cost.csv",
        figures=expand("report/figures/{name}.png", name=FIGURES),
        code=code("lmperf.report.render"),
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
