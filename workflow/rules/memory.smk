# Memory: steps of one model recorded allocation by allocation, per (precision, mode, context). On a
# GPU a CUDA memory snapshot; elsewhere torch.profiler. The job writes CSVs only; a local rule draws
# each timeline.

MEMORY = GRID["memory"]
MEMORY_NAMES = expand(
    "{precision}-{mode}-ctx{ctx}", precision=MEMORY["precisions"], mode=MEMORY["modes"], ctx=MEMORY["context_lengths"]
)
MEMORY_TARGETS = expand("results/memory/{name}.csv", name=MEMORY_NAMES)
MEMORY_ALLOCATION_TARGETS = expand("results/memory/{name}-allocations.csv", name=MEMORY_NAMES)
MEMORY_FIGURES = expand("report/figures/memory/{name}.png", name=MEMORY_NAMES)


rule memory:
    input:
        code("lmperf.studies.memory"),
    output:
        summary="results/memory/{precision}-{mode}-ctx{ctx}.csv",
        allocations="results/memory/{precision}-{mode}-ctx{ctx}-allocations.csv",
        phases="results/memory/{precision}-{mode}-ctx{ctx}-phases.csv",
        timeline="results/memory/{precision}-{mode}-ctx{ctx}-timeline.csv",
    log:
        "logs/memory/{precision}-{mode}-ctx{ctx}.log",
    benchmark:
        "benchmarks/memory/{precision}-{mode}-ctx{ctx}.tsv"
    wildcard_constraints:
        mode=alternatives(grid.PROFILED_MODES),
        ctx=r"\d+",
    resources:
        **cluster("memory"),
        device=1,
    params:
        device=DEVICE,
        size=MEMORY["size"],
        steps=MEMORY["steps"],
        e2e_agreement=MEMORY["e2e_agreement"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.memory --device {params.device} --size {params.size} --context-length {wildcards.ctx}"
        " --mode {wildcards.mode} --precision {wildcards.precision} --steps {params.steps}"
        " --e2e-agreement {params.e2e_agreement} --out {output.summary} > {log} 2>&1"


rule memory_figure:
    input:
        timeline="results/memory/{precision}-{mode}-ctx{ctx}-timeline.csv",
        phases="results/memory/{precision}-{mode}-ctx{ctx}-phases.csv",
        code=code("lmperf.report.memory_figures"),
    output:
        figure("memory_timeline", "report/figures/memory/{precision}-{mode}-ctx{ctx}.png", subcategory="{precision}"),
    log:
        "logs/figures/memory-{precision}-{mode}-ctx{ctx}.log",
    wildcard_constraints:
        mode=alternatives(grid.PROFILED_MODES),
        ctx=r"\d+",
    params:
        title=lambda wc: f"{MEMORY['size']}, {wc.precision}, {wc.mode}, ctx {wc.ctx}",
    shell:
        "python -m lmperf.report.memory_figures --timeline {input.timeline} --phases {input.phases}"
        " --title '{params.title}' --out {output} > {log} 2>&1"
