# FlashAttention-2 benchmarks: the leaderboard shape and a sweep per (dtype, head size). GPU-only;
# on a CPU each target is a row with status "skipped".

FLASH = GRID["flash"]
FLASH_LEADERBOARD_TARGETS = ["results/flash/leaderboard.csv"]
FLASH_SWEEP_TARGETS = expand(
    "results/flash/sweep/{dtype}-d{d}.csv", dtype=FLASH["sweep"]["dtypes"], d=FLASH["sweep"]["head_dims"]
)


rule flash_leaderboard:
    input:
        code("lmperf.studies.flash"),
    output:
        "results/flash/leaderboard.csv",
    log:
        "logs/flash/leaderboard.log",
    benchmark:
        "benchmarks/flash/leaderboard.tsv"
    resources:
        **cluster("flash_leaderboard"),
        device=1,
    params:
        device=DEVICE,
        warmup_ms=FLASH["leaderboard"]["warmup_ms"],
        rep_ms=FLASH["leaderboard"]["rep_ms"],
        rounds=FLASH["leaderboard"]["rounds"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.flash leaderboard --warmup-ms {params.warmup_ms} --rep-ms {params.rep_ms}"
        " --rounds {params.rounds} --out {output} > {log} 2>&1"


rule flash_sweep:
    input:
        code("lmperf.studies.flash"),
    output:
        "results/flash/sweep/{dtype}-d{d}.csv",
    log:
        "logs/flash/sweep/{dtype}-d{d}.log",
    benchmark:
        "benchmarks/flash/sweep/{dtype}-d{d}.tsv"
    wildcard_constraints:
        dtype=alternatives(grid.FLASH_DTYPES),
        d=r"\d+",
    resources:
        **cluster("flash_sweep"),
        device=1,
    params:
        device=DEVICE,
        seq_lengths=",".join(map(str, FLASH["sweep"]["seq_lengths"])),
        implementations=",".join(FLASH["sweep"]["implementations"]),
        warmup_ms=FLASH["sweep"]["warmup_ms"],
        rep_ms=FLASH["sweep"]["rep_ms"],
        rounds=FLASH["sweep"]["rounds"],
        flat_within=FLASH["sweep"]["flat_within"],
        launched_within=FLASH["sweep"]["launched_within"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.flash sweep --dtype {wildcards.dtype} --head-dim {wildcards.d}"
        " --seq-lengths {params.seq_lengths} --implementations {params.implementations}"
        " --warmup-ms {params.warmup_ms} --rep-ms {params.rep_ms} --rounds {params.rounds}"
        " --flat-within {params.flat_within} --launched-within {params.launched_within}"
        " --out {output} > {log} 2>&1"


# Naive attention at scale: one target per (compile, head size), sweeping sequence lengths.
ATTN = GRID["attention"]
ATTENTION_SWEEP_TARGETS = expand("results/attention/{compile}-d{d}.csv", compile=ATTN["compile"], d=ATTN["head_dims"])


rule attention_sweep:
    input:
        code("lmperf.studies.attention_sweep"),
    output:
        "results/attention/{compile}-d{d}.csv",
    log:
        "logs/attention/{compile}-d{d}.log",
    benchmark:
        "benchmarks/attention/{compile}-d{d}.tsv"
    wildcard_constraints:
        d=r"\d+",
    resources:
        **cluster("attention_sweep"),
        device=1,
    params:
        device=DEVICE,
        compile_flag=lambda wc: "--compile" if wc.compile == "compiled" else "",
        seq_lengths=",".join(map(str, ATTN["seq_lengths"])),
        batch=ATTN["batch"],
        steps=ATTN["steps"],
        warmup=ATTN["warmup"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.attention_sweep --device {params.device} --d {wildcards.d} --seq-lengths {params.seq_lengths}"
        " {params.compile_flag} --batch {params.batch} --steps {params.steps} --warmup {params.warmup}"
        " --out {output} > {log} 2>&1"
