# Profiling: a kernel table per (size, mode, context), made with Nsight Systems where it is installed
# (torch.profiler elsewhere), and the same steps timed without a profiler. Naive attention is swapped
# for its annotated copy (ranges around its stages). nsys's .nsys-rep stays beside the CSV, untracked.

PROFILE = GRID["profile"]
PROFILE_NAMES = [
    name.removeprefix("results/profile/").removesuffix(".csv")
    for name in excluding(
        expand(
            "results/profile/{size}/{mode}-ctx{ctx}.csv",
            size=PROFILE["sizes"],
            mode=PROFILE["modes"],
            ctx=PROFILE["context_lengths"],
        ),
        PROFILE.get("exclude", []),
    )
]
PROFILE_TARGETS = expand("results/profile/{name}.csv", name=PROFILE_NAMES)
PROFILE_TIMING_TARGETS = expand("results/profile/{name}-timing.csv", name=PROFILE_NAMES)


rule profile:
    input:
        code("lmperf.studies.profile", "lmperf.attention.annotated"),
    output:
        kernels="results/profile/{size}/{mode}-ctx{ctx}.csv",
        timing="results/profile/{size}/{mode}-ctx{ctx}-timing.csv",
    log:
        "logs/profile/{size}/{mode}-ctx{ctx}.log",
    benchmark:
        "benchmarks/profile/{size}/{mode}-ctx{ctx}.tsv"
    wildcard_constraints:
        size=alternatives(PROFILE["sizes"]),
        mode=alternatives(grid.PROFILED_MODES),
        ctx=r"\d+",
    resources:
        **cluster("profile"),
        device=1,
    params:
        device=DEVICE,
        warmup=PROFILE["warmup_steps"],
        steps=PROFILE["measured_steps"],
        profiler=PROFILE["profiler"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.profile --size {wildcards.size} --context-length {wildcards.ctx}"
        " --mode {wildcards.mode} --warmup-steps {params.warmup} --measured-steps {params.steps}"
        " --profiler {params.profiler} --out {output.kernels} > {log} 2>&1"
