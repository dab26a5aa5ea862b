# End-to-end benchmarks: one target (one process) per (attention, size, precision, compile),
# sweeping the grid's context lengths inside.

E2E_CODE = code("model", "attention/__init__.py", "measure", "ranges.py", "studies/e2e.py")

# Each attention variant's own source, so an edit to the Triton kernel leaves naive targets alone.
ATTENTION_SOURCES = {
    "naive": ["naive.py"],
    "annotated": ["annotated.py", "naive.py"],
    "flash_triton": ["flash_triton.py", "flash_pytorch.py"],
    "flash_pytorch": ["flash_pytorch.py"],
    "sdpa": [],
}


def attention_code(wildcards):
    return E2E_CODE + code(*(f"attention/{f}" for f in ATTENTION_SOURCES[wildcards.get("attention", "naive")]))


# The product of the grid's dimensions, less any target matching a glob of e2e.exclude (for example
# "results/e2e/flash_triton/*/fp32-*" to time our kernel in bf16 only).
E2E_TARGETS = excluding(
    expand(
        "results/e2e/{attention}/{size}/{precision}-{compile}.csv",
        attention=E2E["attention"],
        size=E2E["sizes"],
        precision=E2E["precisions"],
        compile=E2E["compile"],
    ),
    E2E.get("exclude", []),
)

WARMUP_TARGETS = expand(
    "results/warmup/{size}/{mode}/w{warmup}.csv",
    size=WARMUP["sizes"],
    mode=WARMUP["modes"],
    warmup=WARMUP["warmup_steps"],
)


rule e2e:
    input:
        attention_code,
    output:
        "results/e2e/{attention}/{size}/{precision}-{compile}.csv",
    log:
        "logs/e2e/{attention}/{size}/{precision}-{compile}.log",
    params:
        compile_flag=lambda wc: "--compile" if wc.compile == "compiled" else "",
        context_lengths=",".join(map(str, E2E["context_lengths"])),
        batch_size=E2E["batch_size"],
        optimizer=E2E["optimizer"],
        warmup_steps=E2E["warmup_steps"],
        measured_steps=E2E["measured_steps"],
    resources:
        gpu=1,
    shell:
        "{PYTHON} -m lmperf.studies.e2e --size {wildcards.size} --context-lengths {params.context_lengths}"
        " --precision {wildcards.precision} {params.compile_flag} --attention {wildcards.attention}"
        " --batch-size {params.batch_size} --optimizer {params.optimizer}"
        " --warmup-steps {params.warmup_steps} --measured-steps {params.measured_steps}"
        " --out {output} > {log} 2>&1"


rule warmup:
    """Each (size, mode, warm-up count) in a fresh process, so warm-up 0 really starts cold."""
    input:
        attention_code,
    output:
        "results/warmup/{size}/{mode}/w{warmup}.csv",
    log:
        "logs/warmup/{size}/{mode}/w{warmup}.log",
    params:
        ctx=WARMUP["context_length"],
        measured_steps=WARMUP["measured_steps"],
        batch_size=E2E["batch_size"],
    resources:
        gpu=1,
    shell:
        "{PYTHON} -m lmperf.studies.e2e --study warmup --size {wildcards.size} --context-lengths {params.ctx}"
        " --modes {wildcards.mode} --batch-size {params.batch_size}"
        " --warmup-steps {wildcards.warmup} --measured-steps {params.measured_steps}"
        " --out {output} > {log} 2>&1"
