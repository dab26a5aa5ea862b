# End-to-end benchmarks: one target (one process) per (size, precision, compile), sweeping the grid's
# context lengths and timing its attention variants in turns on one model inside (or one process
# per context, for a target split by context).


# The product of the grid's dimensions (compiled only in e2e.compile_precisions), less any target
# matching a glob of e2e.exclude (for example "results/e2e/*/fp32-*" to time bf16 only).
E2E_TARGETS = excluding(
    [
        f"results/e2e/{size}/{precision}-{compile}.csv"
        for size in E2E["sizes"]
        for precision in E2E["precisions"]
        for compile in e2e_compiles(precision)
    ],
    E2E.get("exclude", []),
)


WARMUP_TARGETS = expand(
    "results/warmup/{size}/{mode}/p{process}.csv",
    size=WARMUP["sizes"],
    mode=WARMUP["modes"],
    process=range(WARMUP["processes"]),
)


rule e2e:
    input:
        lambda wc: code("lmperf.studies.e2e", *attention_modules(e2e_attentions(wc.precision))),
    output:
        "results/e2e/{size}/{precision}-{compile}.csv",
    log:
        "logs/e2e/{size}/{precision}-{compile}.log",
    benchmark:
        "benchmarks/e2e/{size}/{precision}-{compile}.tsv"
    resources:
        **cluster("e2e"),
        device=1,
    params:
        device=DEVICE,
        compile_flag=lambda wc: "--compile" if wc.compile == "compiled" else "",
        attention=lambda wc: ",".join(e2e_attentions(wc.precision)),
        context_lengths=",".join(map(str, E2E["context_lengths"])),
        batch_size=E2E["batch_size"],
        optimizer=E2E["optimizer"],
        warmup_steps=E2E["warmup_steps"],
        measured_steps=E2E["measured_steps"],
        ci_halfwidth=E2E["ci_halfwidth"],
        max_seconds=E2E["max_seconds_per_point"],
        settle_seconds=E2E["settle_seconds"],
        physics_slack=E2E["physics_slack"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.e2e --device {params.device} --size {wildcards.size} --context-lengths {params.context_lengths}"
        " --precision {wildcards.precision} {params.compile_flag} --attention {params.attention}"
        " --batch-size {params.batch_size} --optimizer {params.optimizer}"
        " --warmup-steps {params.warmup_steps} --measured-steps {params.measured_steps}"
        " --ci-halfwidth {params.ci_halfwidth} --max-seconds {params.max_seconds}"
        " --settle-seconds {params.settle_seconds} --physics-slack {params.physics_slack} --out {output} > {log} 2>&1"


# A target too long for one job in a short allocation (a glob of e2e.split_by_context, e.g.
# "results/e2e/2.7B/fp32-*") is measured one context per process, each part a job of its own, and
# the parts joined. The attentions still take turns at every point; only the contexts part.
E2E_PARTS = {
    target: [os.path.join(target.removesuffix(".csv"), f"ctx{ctx}.csv") for ctx in E2E["context_lengths"]]
    for target in matching(E2E_TARGETS, E2E.get("split_by_context", []))
}
# The measuring jobs: whole targets, and the parts of split ones.
E2E_JOBS = [t for t in E2E_TARGETS if t not in E2E_PARTS] + [p for parts in E2E_PARTS.values() for p in parts]


use rule e2e as e2e_context with:
    output:
        "results/e2e/{size}/{precision}-{compile}/ctx{ctx}.csv",
    log:
        "logs/e2e/{size}/{precision}-{compile}/ctx{ctx}.log",
    benchmark:
        "benchmarks/e2e/{size}/{precision}-{compile}/ctx{ctx}.tsv"
    wildcard_constraints:
        ctx=r"\d+",
    resources:
        **cluster("e2e_context"),
        device=1,
    params:
        context_lengths=lambda wc: wc.ctx,


rule e2e_join:
    input:
        parts=lambda wc: E2E_PARTS[f"results/e2e/{wc.target}.csv"],
        code=code("lmperf.report.aggregate"),
    output:
        "results/e2e/{target}.csv",
    log:
        "logs/e2e/{target}-join.log",
    wildcard_constraints:
        target=alternatives(t.removeprefix("results/e2e/").removesuffix(".csv") for t in E2E_PARTS),
    shell:
        "python -m lmperf.report.aggregate --out {output} {input.parts} > {log} 2>&1"


ruleorder: e2e_join > e2e


rule warmup:
    """Each (size, mode) in several fresh processes, so warm-up 0 really starts cold and the spread
    across processes separates what the first steps cost from host jitter. A process times every
    step and writes one row per warm-up count: count w's timed steps are those after its first w,
    as a process of the handout's that ran w warm-up steps would time them."""
    input:
        code("lmperf.studies.e2e", "lmperf.attention.naive"),
    output:
        "results/warmup/{size}/{mode}/p{process}.csv",
    log:
        "logs/warmup/{size}/{mode}/p{process}.log",
    benchmark:
        "benchmarks/warmup/{size}/{mode}/p{process}.tsv"
    resources:
        **cluster("warmup"),
        device=1,
    params:
        device=DEVICE,
        ctx=WARMUP["context_length"],
        measured_steps=WARMUP["measured_steps"],
        windows=",".join(map(str, WARMUP["warmup_steps"])),
        batch_size=E2E["batch_size"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.e2e --device {params.device} --study warmup --size {wildcards.size} --context-lengths {params.ctx}"
        " --modes {wildcards.mode} --batch-size {params.batch_size} --no-graph --max-seconds 0"
        " --warmup-steps 0 --warmup-windows {params.windows} --measured-steps {params.measured_steps}"
        " --out {output} > {log} 2>&1"
