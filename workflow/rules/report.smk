# Aggregate the per-target CSVs, draw the figures, render report/final.md.

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
if MEMORY_TARGETS:  # an empty memory.context_lengths leaves the study out
    AGGREGATES.update(memory=MEMORY_TARGETS, memory_allocations=MEMORY_ALLOCATION_TARGETS)
MEMORY_REPORT_INPUTS = (
    {"memory": "results/memory.csv", "memory_allocations": "results/memory_allocations.csv", "memory_figures": MEMORY_FIGURES}
    if MEMORY_TARGETS
    else {}
)
PROFILE_REPORT_INPUTS = (
    {"profile": "results/profile.csv", "profile_timing": "results/profile_timing.csv"} if PROFILE_TARGETS else {}
)
SKIPPED_STUDIES = " ".join(
    f"--skip {study}" for study, targets in (("memory", MEMORY_TARGETS), ("profile", PROFILE_TARGETS)) if not targets
)

E2E_FIGURES = expand(
    "report/figures/{name}.png",
    name=["e2e_host_overhead", "e2e_time_vs_size", "e2e_backward_ratio", "e2e_bf16_speedup", "warmup_cv"],
)


rule aggregate:
    input:
        csvs=lambda wc: AGGREGATES[wc.study],
        code=code("report/aggregate.py", "measure/rows.py"),
    output:
        "results/{study}.csv",
    log:
        "logs/aggregate/{study}.log",
    wildcard_constraints:
        study=alternatives(AGGREGATES),
    shell:
        "{PYTHON} -m lmperf.report.aggregate --out {output} {input.csvs} > {log} 2>&1"


rule e2e_figures:
    input:
        e2e="results/e2e.csv",
        warmup="results/warmup.csv",
        code=code("report/e2e_figures.py", "report/e2e_analysis.py", "report/style.py", "measure/stats.py", "measure/flops.py"),
    output:
        E2E_FIGURES,
    log:
        "logs/figures/e2e.log",
    shell:
        "{PYTHON} -m lmperf.report.e2e_figures --e2e {input.e2e} --warmup {input.warmup}"
        " --outdir report/figures > {log} 2>&1"


rule flash_figures:
    input:
        sweep="results/flash_sweep.csv",
        code=code("report/flash_figures.py", "report/style.py"),
    output:
        "report/figures/flash_tflops.png",
    log:
        "logs/figures/flash.log",
    shell:
        "{PYTHON} -m lmperf.report.flash_figures --sweep {input.sweep} --out {output} > {log} 2>&1"


rule attention_figures:
    input:
        attention="results/attention.csv",
        code=code("report/attention_figures.py", "report/style.py"),
    output:
        "report/figures/attention_sweep.png",
    log:
        "logs/figures/attention.log",
    shell:
        "{PYTHON} -m lmperf.report.attention_figures --attention {input.attention} --out {output} > {log} 2>&1"


rule comm_figures:
    input:
        allreduce="results/allreduce.csv",
        code=code("report/comm_figures.py", "report/style.py"),
    output:
        "report/figures/allreduce_busbw.png",
    log:
        "logs/figures/comm.log",
    shell:
        "{PYTHON} -m lmperf.report.comm_figures --allreduce {input.allreduce} --out {output} > {log} 2>&1"


rule ddp_figures:
    input:
        timeline="results/ddp/timeline.csv",
        code=code("report/ddp_figures.py", "report/style.py"),
    output:
        "report/figures/ddp_timeline.png",
    log:
        "logs/figures/ddp.log",
    shell:
        "{PYTHON} -m lmperf.report.ddp_figures --timeline {input.timeline} --out {output} > {log} 2>&1"


rule report:
    input:
        e2e="results/e2e.csv",
        warmup="results/warmup.csv",
        precision=expand("results/precision/{experiment}.csv", experiment=["accumulation", "autocast", "layernorm"]),
        leaderboard="results/flash/leaderboard.csv",
        flash_sweep="results/flash_sweep.csv",
        allreduce="results/allreduce.csv",
        comm_fit="results/comm_fit.csv",
        attention="results/attention.csv",
        ddp_train="results/ddp_train.csv",
        ddp_sharding="results/ddp/sharding.csv",
        ddp_timeline="results/ddp/timeline.csv",
        **MEMORY_REPORT_INPUTS,
        **PROFILE_REPORT_INPUTS,
        figures=E2E_FIGURES + expand("report/figures/{name}.png",
                                     name=["flash_tflops", "allreduce_busbw", "attention_sweep", "ddp_timeline"]),
        code=code("report/render.py", "report/markdown.py", "report/e2e_section.py", "report/e2e_analysis.py",
                  "measure/stats.py", "measure/flops.py",
                  "report/precision_section.py", "report/flash_section.py", "report/comm_section.py",
                  "report/attention_section.py", "report/ddp_section.py", "report/memory_section.py", "report/profile_section.py",
                  "distributed/bucket_model.py", "distributed/accounting.py", "distributed/ddp.py", "model"),
    output:
        "report/final.md",
    log:
        "logs/report.log",
    params:
        grid=GRID_NAME,
        skip=SKIPPED_STUDIES,
    shell:
        "{PYTHON} -m lmperf.report.render --grid {params.grid} {params.skip} --results results --figures report/figures"
        " --out {output} > {log} 2>&1"
