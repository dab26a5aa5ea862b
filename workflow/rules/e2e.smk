# End-to-end benchmarks: one target (one process) per (size, precision, compile), sweeping the grid's
# context lengths and timing its attention variants interleaved on one model inside.


# The product of the grid's dimensions, less any target matching a glob of e2e.exclude (for example
# "results/e2e/*/fp32-*" to time bf16 only).
E2E_TARGETS = excluding(
    expand(
        "results/e2e/{size}/{precision}-{compile}.csv",
        size=E2E["sizes"],
        precision=E2E["precisions"],
        compile=E2E["compile"],
    ),
    E2E.get("exclude", []),
)

WARMUP_TARGETS = expand(
    "results/warmup/{size}/{mode}/w{warmup}-p{process}.csv",
    size=WARMUP["sizes"],
    mode=WARMUP["modes"],
    warmup=WARMUP["warmup_steps"],
    process=range(WARMUP["processes"]),
)


rule e2e:
    input:
        code("lmperf.studies.e2e", *attention_modules(E2E["attention"])),
    output:
        "results/e2e/{size}/{precision}-{compile}.csv",
    log:
        "logs/e2e/{size}/{precision}-{compile}.log",
    benchmark:
        "benchmarks/e2e/{size}/{precision}-{compile}.tsv"
    resources:
        device=1,
    params:
        compile_flag=lambda wc: "--compile" if wc.compile == "compiled" else "",
        attention=",".join(E2E["attention"]),
        context_lengths=",".join(map(str, E2E["context_lengths"])),
        batch_size=E2E["batch_size"],
        optimizer=E2E["optimizer"],
        warmup_steps=E2E["warmup_steps"],
        measured_steps=E2E["measured_steps"],
        ci_halfwidth=E2E["ci_halfwidth"],
        max_seconds=E2E["max_seconds_per_point"],
    shell:
        "python -m lmperf.studies.e2e --size {wildcards.size} --context-lengths {params.context_lengths}"
        " --precision {wildcards.precision} {params.compile_flag} --attention {params.attention}"
        " --batch-size {params.batch_size} --optimizer {params.optimizer}"
        " --warmup-steps {params.warmup_steps} --measured-steps {params.measured_steps}"
        " --ci-halfwidth {params.ci_halfwidth} --max-seconds {params.max_seconds}"
        " --out {output} > {log} 2>&1"


rule warmup:
    """Each (size, mode, warm-up count) in several fresh processes, so warm-up 0 really starts cold
    and the spread across processes separates what the first steps cost from host jitter."""
    input:
        code("lmperf.studies.e2e", "lmperf.attention.naive"),
    output:
        "results/warmup/{size}/{mode}/w{warmup}-p{process}.csv",
    log:
        "logs/warmup/{size}/{mode}/w{warmup}-p{process}.log",
    benchmark:
        "benchmarks/warmup/{size}/{mode}/w{warmup}-p{process}.tsv"
    resources:
        device=1,
    params:
        ctx=WARMUP["context_length"],
        measured_steps=WARMUP["measured_steps"],
        batch_size=E2E["batch_size"],
    shell:
        "python -m lmperf.studies.e2e --study warmup --size {wildcards.size} --context-lengths {params.ctx}"
        " --modes {wildcards.mode} --batch-size {params.batch_size} --no-graph --max-seconds 0"
        " --warmup-steps {wildcards.warmup} --measured-steps {params.measured_steps}"
        " --out {output} > {log} 2>&1"
