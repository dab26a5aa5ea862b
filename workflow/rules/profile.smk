# Profiling: kernel tables per (size, mode, context), made with Nsight Systems where it is installed
# (torch.profiler elsewhere), and the same steps timed without a profiler. One target (one job, one
# nsys session) per size, profiling its modes and contexts one after another. Naive attention is
# swapped for its annotated copy (ranges around its stages). nsys's .nsys-rep stays beside the CSV,
# untracked.

PROFILE = GRID["profile"]
PROFILE_TARGETS = excluding(expand("results/profile/{size}.csv", size=PROFILE["sizes"]), PROFILE.get("exclude", []))
PROFILE_TIMING_TARGETS = [target.replace(".csv", "-timing.csv") for target in PROFILE_TARGETS]


rule profile:
    input:
        code("lmperf.studies.profile", "lmperf.attention.annotated"),
    output:
        kernels="results/profile/{size}.csv",
        timing="results/profile/{size}-timing.csv",
    log:
        "logs/profile/{size}.log",
    benchmark:
        "benchmarks/profile/{size}.tsv"
    wildcard_constraints:
        size=alternatives(PROFILE["sizes"]),
    resources:
        **cluster("profile"),
        device=1,
    params:
        device=DEVICE,
        context_lengths=",".join(map(str, PROFILE["context_lengths"])),
        modes=",".join(PROFILE["modes"]),
        warmup=PROFILE["warmup_steps"],
        steps=PROFILE["measured_steps"],
        profiler=PROFILE["profiler"],
    shell:
        "python -m lmperf.gpu_slots {resources.device} -- "
        "python -m lmperf.studies.profile --device {params.device} --size {wildcards.size} --context-lengths {params.context_lengths}"
        " --modes {params.modes} --warmup-steps {params.warmup} --measured-steps {params.steps}"
        " --profiler {params.profiler} --out {output.kernels} > {log} 2>&1"
