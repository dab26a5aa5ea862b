# The roofline ladder: per (size, context), two jobs, each one process and one model. The first times
# every rung in interleaved turns; the second, on a model built again from the same seed, trains each
# rung for its loss check and profiles its kernels. Split so that each fits a 10-minute slice: at 2.7B,
# context 512, the two in one process passed 555 s. An empty ladder.sizes leaves the study out.

LADDER = GRID["ladder"]
LADDER_TARGETS = expand("results/ladder/{size}/ctx{ctx}.csv", size=LADDER["sizes"], ctx=LADDER["context_lengths"])
LADDER_KERNEL_TARGETS = [t.replace(".csv", "-kernels.csv") for t in LADDER_TARGETS]
LADDER_TIMED_TARGETS = [t.replace(".csv", "-timed.csv") for t in LADDER_TARGETS]
LADDER_CODE = code(
    "lmperf.studies.ladder", "lmperf.kernels.fused_adamw", *attention_modules(["naive", "flash_triton", "sdpa"])
)


rule ladder_timed:
    input:
        LADDER_CODE,
    output:
        "results/ladder/{size}/ctx{ctx}-timed.csv",
    log:
        "logs/ladder/{size}/ctx{ctx}-timed.log",
    benchmark:
        "benchmarks/ladder/{size}/ctx{ctx}-timed.tsv"
    wildcard_constraints:
        ctx=r"\d+",
    resources:
        **cluster("ladder_timed"),
        device=1,
    params:
        device=DEVICE,
        batch_size=LADDER["batch_size"],
        warmup_steps=LADDER["warmup_steps"],
        measured_steps=LADDER["measured_steps"],
        ci_halfwidth=LADDER["ci_halfwidth"],
        max_seconds=LADDER["max_seconds_per_point"],
        settle_seconds=LADDER["settle_seconds"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.ladder --device {params.device} --part timed --size {wildcards.size} --context-length {wildcards.ctx}"
        " --batch-size {params.batch_size} --warmup-steps {params.warmup_steps}"
        " --measured-steps {params.measured_steps} --ci-halfwidth {params.ci_halfwidth}"
        " --max-seconds {params.max_seconds} --settle-seconds {params.settle_seconds} --out {output} > {log} 2>&1"


rule ladder:
    input:
        LADDER_CODE,
        timed="results/ladder/{size}/ctx{ctx}-timed.csv",
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
        **cluster("ladder"),
        device=1,
    params:
        device=DEVICE,
        batch_size=LADDER["batch_size"],
        check_steps=LADDER["check_steps"],
        settle_seconds=LADDER["settle_seconds"],
        loss_tolerance=LADDER["loss_tolerance"],
        power_limit_share=LADDER["power_limit_share"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.ladder --device {params.device} --part checked --timed {input.timed} --size {wildcards.size}"
        " --context-length {wildcards.ctx} --batch-size {params.batch_size} --check-steps {params.check_steps}"
        " --settle-seconds {params.settle_seconds} --loss-tolerance {params.loss_tolerance}"
        " --power-limit-share {params.power_limit_share}"
        " --out {output.rungs} --kernels {output.kernels} > {log} 2>&1"


rule ladder_figures:
    input:
        ladder="results/ladder.csv",
        code=code("lmperf.report.ladder_figures"),
    output:
        figure("ladder_waterfall"),
    log:
        "logs/figures/ladder.log",
    shell:
        "python -m lmperf.report.ladder_figures --ladder {input.ladder} --out {output} > {log} 2>&1"
