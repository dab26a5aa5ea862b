# The roofline ladder: one target (one process) per (size, context), every rung timed interleaved on
# one model inside. An empty ladder.sizes leaves the study out.

LADDER = GRID["ladder"]
LADDER_TARGETS = expand("results/ladder/{size}/ctx{ctx}.csv", size=LADDER["sizes"], ctx=LADDER["context_lengths"])
LADDER_KERNEL_TARGETS = [t.replace(".csv", "-kernels.csv") for t in LADDER_TARGETS]


rule ladder:
    input:
        code(
            "lmperf.studies.ladder",
            "lmperf.model.fused_adamw",
            *attention_modules(["naive", "flash_triton", "sdpa"]),
        ),
    output:
        rungs="results/ladder/{size}/ctx{ctx}.csv",
        kernels="results/ladder/{size}/ctx{ctx}-kernels.csv",
    log:
        "logs/ladder/{size}/ctx{ctx}.log",
    benchmark:
        "benchmarks/ladder/{size}/ctx{ctx}.tsv"
    wildcard_constraints:
        ctx=r"\d+",
    resources:
        device=1,
    params:
        batch_size=LADDER["batch_size"],
        warmup_steps=LADDER["warmup_steps"],
        measured_steps=LADDER["measured_steps"],
        ci_halfwidth=LADDER["ci_halfwidth"],
        max_seconds=LADDER["max_seconds_per_point"],
        check_steps=LADDER["check_steps"],
        settle_seconds=LADDER["settle_seconds"],
    shell:
        "python -m lmperf.studies.ladder --size {wildcards.size} --context-length {wildcards.ctx}"
        " --batch-size {params.batch_size} --warmup-steps {params.warmup_steps}"
        " --measured-steps {params.measured_steps} --ci-halfwidth {params.ci_halfwidth}"
        " --max-seconds {params.max_seconds} --check-steps {params.check_steps}"
        " --settle-seconds {params.settle_seconds} --out {output.rungs} --kernels {output.kernels} > {log} 2>&1"


rule ladder_figures:
    input:
        ladder="results/ladder.csv",
        code=code("lmperf.report.ladder_figures"),
    output:
        report("report/figures/ladder_waterfall.png", caption="../report/ladder_waterfall.rst", category="Ladder"),
    log:
        "logs/figures/ladder.log",
    shell:
        "python -m lmperf.report.ladder_figures --ladder {input.ladder} --out {output} > {log} 2>&1"
