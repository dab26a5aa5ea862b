# Memory: one step of one model recorded allocation by allocation, per (precision, mode, context).
# On a GPU a CUDA memory snapshot; elsewhere torch.profiler. The snapshot (pickle, HTML) is not kept.

MEMORY = GRID["memory"]
MEMORY_NAMES = expand(
    "{precision}-{mode}-ctx{ctx}", precision=MEMORY["precisions"], mode=MEMORY["modes"], ctx=MEMORY["context_lengths"]
)
MEMORY_TARGETS = expand("results/memory/{name}.csv", name=MEMORY_NAMES)
MEMORY_ALLOCATION_TARGETS = expand("results/memory/{name}-allocations.csv", name=MEMORY_NAMES)
MEMORY_FIGURES = expand("report/figures/memory/{name}.png", name=MEMORY_NAMES)


rule memory:
    input:
        code("measure", "model", "training.py", "attention/__init__.py", "attention/naive.py", "memory_trace.py",
             "studies/memory.py", "studies/__init__.py"),
    output:
        summary="results/memory/{precision}-{mode}-ctx{ctx}.csv",
        allocations="results/memory/{precision}-{mode}-ctx{ctx}-allocations.csv",
        phases="results/memory/{precision}-{mode}-ctx{ctx}-phases.csv",
        timeline="results/memory/{precision}-{mode}-ctx{ctx}-timeline.csv",
    log:
        "logs/memory/{precision}-{mode}-ctx{ctx}.log",
    wildcard_constraints:
        mode="forward|train_step",
        ctx=r"\d+",
    params:
        size=MEMORY["size"],
        steps=MEMORY["steps"],
    resources:
        gpu=1,
    shell:
        "{PYTHON} -m lmperf.studies.memory --size {params.size} --context-length {wildcards.ctx} --mode {wildcards.mode}"
        " --precision {wildcards.precision} --steps {params.steps} --out {output.summary} > {log} 2>&1"


rule memory_figure:
    input:
        timeline="results/memory/{precision}-{mode}-ctx{ctx}-timeline.csv",
        phases="results/memory/{precision}-{mode}-ctx{ctx}-phases.csv",
        code=code("report/memory_figures.py", "report/style.py"),
    output:
        "report/figures/memory/{precision}-{mode}-ctx{ctx}.png",
    log:
        "logs/figures/memory-{precision}-{mode}-ctx{ctx}.log",
    wildcard_constraints:
        mode="forward|train_step",
        ctx=r"\d+",
    params:
        title=lambda wc: f"{MEMORY['size']}, {wc.precision}, {wc.mode}, ctx {wc.ctx}",
    shell:
        "{PYTHON} -m lmperf.report.memory_figures --timeline {input.timeline} --phases {input.phases}"
        " --title '{params.title}' --out {output} > {log} 2>&1"
