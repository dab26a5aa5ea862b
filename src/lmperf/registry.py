"""Each study declared once: its config section, its targets and aggregates, its figures with their
captions, its report section, the columns its rows promise and what its jobs ask of a Slurm cluster.

The workflow (the Snakefile's target lists, the aggregates, figures and the report's inputs, each rule's
cluster resources), the report (which sections to render, from which files) and the tests read these
declarations, so a study is added here and in its own files, not in lists kept elsewhere. Plain
dataclasses, in the spirit of torchtitan's ModelSpec. No torch (the workflow imports this module to
build its DAG in seconds), and no import of lmperf.report or lmperf.studies: a section is named by its
module's name, which the report imports.
"""

from dataclasses import dataclass, field
from pathlib import Path

from lmperf import grid


@dataclass(frozen=True)
class Figure:
    """A figure drawn from a study's results: its caption in `snakemake --report`, and the category it
    is filed under. ``files`` names the rule file's list of its files where it is drawn once per target
    (the memory timelines); else it is the one file report/figures/<name>.png."""

    caption: str
    category: str
    files: str | None = None


@dataclass(frozen=True)
class Study:
    """One study, as the workflow, the report and the tests see it.

    - ``config``: its section of a grid in config.yaml (workflow/schemas/config.schema.yaml describes
      it); None for a study with no knobs.
    - ``rule_file``: the file under workflow/rules/ that holds its rules (the Snakefile includes it).
    - ``aggregates``: result name -> the rule file's list of the targets gathered into
      results/<name>.csv. The first list left empty (``optional``: the grid's key that empties it)
      leaves the study out of the run, and its section says so.
    - ``jobs``: the rule file's lists of the files its measuring jobs write; a list means one GPU per
      job, a dict maps each file to the GPUs its job uses.
    - ``rules``: its measuring rules -> what each job asks of a Slurm cluster (gpu, runtime in minutes,
      mem_mb, cpus_per_task); a local run reads none of it.
    - ``section``: the module under lmperf.report whose ``render`` writes its report section, called
      with the frames of ``reads`` (results/<name>.csv, in render's argument order); ``title`` is the
      section's heading.
    - ``columns``: per result name, the columns the rows promise and their types, beside the columns
      every row has (ROW, ENV). The report reads no other column (tests/test_registry.py checks it).
    """

    name: str
    config: str | None
    rules: dict[str, dict]
    rule_file: str | None = None
    aggregates: dict[str, str] = field(default_factory=dict)
    jobs: tuple[str, ...] = ()
    figures: dict[str, Figure] = field(default_factory=dict)
    section: str | None = None
    title: str = ""
    reads: tuple[str, ...] = ()
    columns: dict[str, dict[str, type]] = field(default_factory=dict)
    optional: str | None = None


# Every study's rows: what ran, whether it worked, and where (lmperf.measure.env.fingerprint).
ROW = {"study": str, "status": str, "note": str}
ENV = {
    "device_name": str,
    "device_type": str,
    "commit": str,
    "host": str,
    "torch_version": str,
    "cuda_version": str,
    "triton_version": str,
    "driver_version": str,
}
# The settings a row's claims depend on: the CI it was measured to, the launched/graphed ratio above
# which it is host-bound, the most seconds of untimed work before its graphed timing, and the rules
# that end that hold once the step is steady or far below the power limit (lmperf.measure.power.hold).
SETTINGS = {
    "ci_halfwidth": float,
    "host_bound_threshold": float,
    "settle_seconds": float,
    "settle_window_s": float,
    "settle_windows": int,
    "settle_tolerance": float,
    "settle_far_below": float,
}

# What a measuring job on one GPU asks of Slurm: about 3x the longest job of its rule seen on an H100.
GPU_JOB = {"gpu": 1, "mem_mb": 64000, "cpus_per_task": 8}


# What a data-parallel job asks of Slurm: a GPU per rank (its target names the world size), and CPU
# cores for the ranks' host work.
DDP_JOB = {
    "gpu": lambda wildcards: int(wildcards.world),
    "cpus_per_task": lambda wildcards: max(8, 4 * int(wildcards.world)),
    "mem_mb": 128000,
}


def allreduce_gpus(backend, world) -> int:
    """GPUs an all-reduce job uses: one per rank for NCCL, none for gloo's CPU ranks."""
    return int(world) if backend == "nccl" else 0


def held_in_turns(prefix: str) -> dict:
    """The columns of a block timed in turns while the GPU is sampled, under ``prefix`` ('graphed_',
    'launched_', 'replay_'): the sampled clock and power (measure/power.py's ``Samples.columns``) and
    each turn's median, clock, power and hold (measure/turns.py's ``turn_columns``)."""
    sampled = {
        "sm_clock_mhz": float,
        "power_w": float,
        "power_limit_w": float,
        "temperature_c": float,
        "clock_event_reasons": str,
        "gpu_samples": int,
        "gpu_note": str,
    }
    turns = {
        "turns": int,
        "turn_ms": str,
        "turn_sm_clock_mhz": str,
        "turn_power_w": str,
        "turn_temperature_c": str,
        "turn_clock_event_reasons": str,
        "settle_steps": int,
        "turn_settle_s": str,
        "turn_retimed": str,
    }
    return {prefix + name: kind for name, kind in {**sampled, **turns}.items()}


# The columns each result's rows promise beyond ROW and ENV, by result name (results/<name>.csv).
# fmt: off
COLUMNS = {
    "allreduce": {
        "algbw_gbps": float, "backend": str, "busbw_gbps": float, "bytes": int, "ci95_high_ms": float,
        "ci95_low_ms": float, "cv": float, "device": str, "iters": int, "median_ms": float, "min_ms": float,
        "n_steps": int, "warmup": int, "world_size": int,
    },
    "attention": {
        "backward_mean_ms": float, "batch": int, "compile": str, "computed_saved_mib": float,
        "computed_square_mib": float, "d": int, "device_total_mib": float, "first_call_ms": float,
        "forward_mean_ms": float, "held_for_backward_mib": float, "observed_saved_mib": float, "seq": int,
        "steps": int,
    },
    "comm_fit": {
        "backend": str, "bandwidth_gbps": float, "max_bytes": int, "min_bytes": int, "overhead_us": float,
        "r2": float, "sizes": int, "world_size": int, "min_r2": float,
    },
    "cost": {
        "gpus": int, "job": str, "wall_s": float,
    },
    "ddp/sharding": {
        "allocated_after_step_mib": float, "allocated_before_step_mib": float, "backend": str,
        "broadcast_median_ms": float, "ci95_high_ms": float, "ci95_low_ms": float, "context_length": int,
        "cv": float, "global_batch": int, "grad_mib": float, "local_update_median_ms": float, "median_ms": float,
        "min_ms": float, "n_steps": int, "optimizer": str, "optimizer_ci95_high_ms": float,
        "optimizer_ci95_low_ms": float, "optimizer_median_ms": float, "optimizer_state_mib": float,
        "param_mib": float, "params": int, "peak_during_step_mib": float, "sharded": bool, "size": str,
        "step_ms": float, "world_size": int,
    },
    "ddp/timeline": {
        "backend": str, "duration_ms": float, "global_batch": int, "kernel": str, "kind": str, "profiler": str,
        "size": str, "start_ms": float, "stream": int, "traced_step_ms": float, "untraced_step_ms": float,
        "variant": str, "world_size": int,
    },
    "ddp_train": {
        "backend": str, "backward_times_ms": str, "ci95_high_ms": float, "ci95_low_ms": float, "context_length": int,
        "cv": float, "global_batch": int, "grad_mib": float, "hook_times_ms": str, "max_seconds": float,
        "median_ms": float,
        "min_ms": float, "min_steps": int, "n_steps": int, "params": int, "size": str, "step_ms": float,
        "step_times_ms": str, "steps": int, "sync_ms": float, "sync_times_ms": str, "variant": str,
        "vs_anchor": float, "vs_anchor_ci95_high": float, "vs_anchor_ci95_low": float, "warmup": int,
        "world_size": int,
    },
    "e2e": {
        "attention": str, "attention_kernel": str, "batch_size": int, "ci95_high_ms": float, "ci95_low_ms": float,
        "compile": str,
        "context_length": int, "cv": float, "device": str, "event_median_ms": float, "first_step_ms": float,
        "graphed_ci95_high_ms": float, "graphed_ci95_low_ms": float, "graphed_median_ms": float,
        "graphed_mfu": float, "graphed_settle_s": float, "graphed_step_times_ms": str, "host_bound": bool,
        "host_overhead_ms": float,
        "matmul_precision": str, "measured_steps": int, "median_ms": float, "mfu": float, "min_ms": float,
        "mode": str, "model_tflop_per_step": float, "n_steps": int, "optimizer": str, "params": int,
        "peak_mem_gib": float, "peak_tflops": float, "precision": str, "size": str, "step_times_ms": str,
        "tokens_per_s": float, "warmup_steps": int, "physics_slack": float, "lr": float, **held_in_turns("graphed_"),
    },
    "flash/leaderboard": {
        "attention_kernel": str, "batch": int, "ci95_high_ms": float, "ci95_low_ms": float, "cv": float, "d": int,
        "dtype": str,
        "graphed_ci95_high_ms": float, "graphed_ci95_low_ms": float, "graphed_median_ms": float, "host_bound": bool,
        "host_overhead_ms": float, "implementation": str, "median_ms": float, "min_ms": float, "n_steps": int,
        "pass": str, "peak_mem_gib": float, "rel_diff_vs_sdpa_flash": float, "rep_ms": int, "round_ms": str,
        "rounds": int, "seq": int, "tflops": float, "warmup_ms": int,
    },
    "flash_sweep": {
        "attention_kernel": str, "batch": int, "d": int, "dtype": str, "graphed_median_ms": float, "host_bound": bool,
        "host_overhead_ms": float, "implementation": str, "median_ms": float, "pass": str, "peak_mem_gib": float,
        "rep_ms": int, "seq": int, "tflops": float, "warmup_ms": int, "flat_within": float, "round_ms": str,
        "rounds": int, "launched_within": float, "tiles": str,
    },
    "ladder": {
        "adds": str, "attention": str, "attention_kernel": str, "backward_ms": float, "batch_size": int,
        "check_lr": float, "check_steps": int,
        "ci95_high_ms": float, "ci95_low_ms": float, "compile": str, "context_length": int, "cv": float,
        "event_median_ms": float, "first_step_ms": float, "forward_ms": float, "fwd_bwd_mfu": float, "graphed": bool,
        "graphed_ci95_high_ms": float, "graphed_ci95_low_ms": float, "graphed_median_ms": float,
        "graphed_mfu": float, "graphed_step_times_ms": str, "hbm_gbps": float, "host_bound": bool,
        "host_overhead_ms": float, "initial_loss": float, "loss": str, "loss_after_check": float,
        "matmul_tflops": float, "median_ms": float, "mfu": float,
        "min_ms": float, "model_tflop_per_step": float, "n_steps": int, "on_ladder": bool, "optimizer": str,
        "optimizer_bound_ms": float, "optimizer_gbps": float, "optimizer_graphed_gbps": float,
        "optimizer_graphed_ms": float, "optimizer_ms": float, "order": int, "params": int, "peak_mem_gib": float,
        "peak_tflops": float, "precision": str, "replay_settle_s": float, "rung": str, "size": str,
        "step_times_ms": str, "tokens_per_s": float, "weights": str, "loss_tolerance": float,
        "power_limit_share": float, **held_in_turns("launched_"), **held_in_turns("replay_"),
    },
    "ladder_kernels": {
        "batch_size": int, "category": str, "context_length": int, "kernel": str, "ms_per_step": float, "rung": str,
        "size": str,
    },
    "memory": {
        "after_backward_mib": float, "after_forward_mib": float, "after_optimizer_step_mib": float,
        "allocator_peak_mib": float, "batch_size": int, "context_length": int, "mode": str, "params": int,
        "peak_activations_mib": float, "peak_gradients_mib": float, "peak_optimizer_mib": float, "peak_stage": str,
        "peak_weights_mib": float, "precision": str, "profiler": str, "size": str, "state": str, "step": int,
        "steps": int, "trace_peak_mib": float, "e2e_agreement": float,
    },
    "memory_allocations": {
        "context_length": int, "count": int, "frame": str, "mode": str, "precision": str, "size_mib": float,
        "what": str, "largest_share": float,
    },
    "precision/accumulation": {
        "abs_error": float, "accumulator": str, "n_adds": int, "result": float, "summand": str,
        "summand_cast_to_accumulator": bool, "summand_stored": float, "summand_value": float,
    },
    "precision/autocast": {
        "autocast_dtype": str, "device": str, "dtype": str, "tensor": str,
    },
    "precision/layernorm": {
        "d": int, "dtype": str, "mean_square": float, "mean_square_rel_error": float, "output_finite": bool,
        "output_rel_error": float, "scale": float,
    },
    "profile": {
        "batch_size": int, "category": str, "context_length": int, "instances_per_step": float, "kernel": str,
        "measured_steps": int, "mode": str, "profiler": str, "range": str, "size": str, "total_ms": float,
    },
    "profile_timing": {
        "batch_size": int, "context_length": int, "measured_steps": int, "mode": str, "profiled_step_ms": float,
        "profiler": str, "profiler_forward_basis": str, "profiler_forward_ms": float, "size": str, "step_ms": float,
    },
    "warmup": {
        "attention": str, "batch_size": int, "ci95_high_ms": float, "ci95_low_ms": float, "compile": str,
        "context_length": int, "cv": float, "device": str, "event_median_ms": float, "first_step_ms": float,
        "graphed_mfu": float, "matmul_precision": str, "measured_steps": int, "median_ms": float, "mfu": float,
        "min_ms": float, "mode": str, "model_tflop_per_step": float, "n_steps": int, "optimizer": str, "params": int,
        "peak_mem_gib": float, "peak_tflops": float, "precision": str, "size": str, "step_times_ms": str,
        "tokens_per_s": float, "warmup_steps": int, "warmup_windows": str,
    },}
# fmt: on


def _figures(category: str, captions: dict[str, str]) -> dict[str, Figure]:
    return {name: Figure(" ".join(caption.split()), category) for name, caption in captions.items()}


STUDIES = {
    study.name: study
    for study in (
        Study(
            "e2e",
            rule_file="e2e.smk",
            config="e2e",
            rules={"e2e": {**GPU_JOB, "runtime": 60}, "e2e_context": {**GPU_JOB, "runtime": 30}},
            aggregates={"e2e": "E2E_TARGETS"},
            jobs=("E2E_JOBS",),
            figures=_figures(
                "End to end",
                {
                    "e2e_host_overhead": """Train step time per model size, as launched (open markers: the
                        handout's method, host launches included) and replayed as a CUDA graph (filled:
                        GPU-bound). Where the two differ the launched time measures the host, not the GPU.
                        From ``results/e2e.csv``.""",
                    "e2e_time_vs_size": """Graphed (GPU-bound) step time against model size, per mode and
                        compile setting; colour is the context length, line style the precision. From
                        ``results/e2e.csv``.""",
                    "e2e_backward_ratio": """Cost of the backward pass: graphed forward+backward time over
                        graphed forward time, per model size. A ratio near 3 is the matmul FLOP count's
                        prediction. From ``results/e2e.csv``.""",
                    "e2e_bf16_speedup": """bf16 speed-up: graphed fp32 time over graphed bf16 time of the
                        same step, per model size and context. From ``results/e2e.csv``.""",
                    "warmup_cv": """Warm-up: the measured median of each fresh process against the number
                        of warm-up steps before it. With no warm-up the first steps' compilation and
                        allocation land in the measurement. From ``results/warmup.csv``.""",
                },
            ),
            section="e2e_section",
            title="End-to-end benchmarking",
            reads=("e2e", "warmup"),
            columns={"e2e": COLUMNS["e2e"] | SETTINGS},
        ),
        Study(
            "batch",
            config="batch",
            rule_file="batch.smk",
            rules={"batch": {**GPU_JOB, "runtime": 30}},
            aggregates={"batch": "BATCH_TARGETS"},
            jobs=("BATCH_TARGETS",),
            figures={
                "batch_host_overhead": Figure(
                    "The train step against batch size, per model size: tokens/s launched (solid) and graphed"
                    " (dashed), and the host's share of a launched step (launched over graphed time less 1); the"
                    " dotted line is the host-bound threshold of the rows. From ``results/batch.csv``.",
                    "Batch size",
                )
            },
            section="batch_section",
            title="Where does the host stop mattering?",
            reads=("batch",),
            columns={
                "batch": {
                    **{name: COLUMNS["e2e"][name] for name in ("size", "context_length", "batch_size", "precision")},
                    **{name: COLUMNS["e2e"][name] for name in ("compile", "attention", "median_ms", "mfu")},
                    **{
                        name: COLUMNS["e2e"][name]
                        for name in ("graphed_median_ms", "graphed_mfu", "tokens_per_s", "params")
                    },
                    "host_overhead": float,
                    **SETTINGS,
                }
            },
            optional="batch.sizes",
        ),
        Study(
            "warmup",
            rule_file="e2e.smk",
            config="warmup",
            rules={"warmup": {**GPU_JOB, "runtime": 10, "mem_mb": 32000}},
            aggregates={"warmup": "WARMUP_TARGETS"},
            jobs=("WARMUP_TARGETS",),
            columns={"warmup": COLUMNS["warmup"]},
        ),
        Study(
            "ladder",
            rule_file="ladder.smk",
            config="ladder",
            rules={"ladder_timed": {**GPU_JOB, "runtime": 20}, "ladder": {**GPU_JOB, "runtime": 15}},
            aggregates={"ladder": "LADDER_TARGETS", "ladder_kernels": "LADDER_KERNEL_TARGETS"},
            jobs=("LADDER_TIMED_TARGETS", "LADDER_TARGETS"),
            figures=_figures(
                "Ladder",
                {
                    "ladder_waterfall": """The roofline ladder: per model size and context, the handout's
                        train step, then what each rung (one technique added to the rung before) saves;
                        the dashed line is the torch stack (whole-model torch.compile, SDPA, torch's fused
                        AdamW), measured in the same process. From ``results/ladder.csv``.""",
                },
            ),
            section="ladder_section",
            title="How fast can it train?",
            reads=("ladder", "ladder_kernels", "e2e"),
            columns={"ladder": COLUMNS["ladder"] | SETTINGS, "ladder_kernels": COLUMNS["ladder_kernels"]},
            optional="ladder.sizes",
        ),
        Study(
            "precision",
            rule_file="precision.smk",
            config=None,
            rules={"precision": {"runtime": 10, "mem_mb": 8000, "cpus_per_task": 2}},
            jobs=("PRECISION_TARGETS",),
            section="precision_section",
            title="Mixed precision",
            reads=tuple(f"precision/{name}" for name in grid.PRECISION_EXPERIMENTS),
            columns={f"precision/{name}": COLUMNS[f"precision/{name}"] for name in grid.PRECISION_EXPERIMENTS},
        ),
        Study(
            "profile",
            rule_file="profile.smk",
            config="profile",
            rules={"profile": {**GPU_JOB, "runtime": 20}},
            aggregates={"profile": "PROFILE_TARGETS", "profile_timing": "PROFILE_TIMING_TARGETS"},
            jobs=("PROFILE_TARGETS",),
            section="profile_section",
            title="Profiling",
            reads=("profile", "profile_timing", "e2e"),
            columns={"profile": COLUMNS["profile"], "profile_timing": COLUMNS["profile_timing"]},
            optional="profile.sizes",
        ),
        Study(
            "memory",
            rule_file="memory.smk",
            config="memory",
            rules={"memory": {**GPU_JOB, "runtime": 15}},
            aggregates={"memory": "MEMORY_TARGETS", "memory_allocations": "MEMORY_ALLOCATION_TARGETS"},
            jobs=("MEMORY_TARGETS",),
            figures={
                "memory_timeline": Figure(
                    "Active memory of {{ snakemake.wildcards.precision }} {{ snakemake.wildcards.mode }} at"
                    " context {{ snakemake.wildcards.ctx }}: live memory along the allocation trace, stacked"
                    " by what it is (weights, optimizer state, gradients, activations and temporaries),"
                    " phases shaded, one band per step. From ``results/memory/{{ snakemake.wildcards.precision"
                    " }}-{{ snakemake.wildcards.mode }}-ctx{{ snakemake.wildcards.ctx }}-timeline.csv``.",
                    "Memory",
                    files="MEMORY_FIGURES",
                )
            },
            section="memory_section",
            title="Memory",
            reads=("memory", "memory_allocations", "e2e"),
            columns={"memory": COLUMNS["memory"], "memory_allocations": COLUMNS["memory_allocations"]},
            optional="memory.context_lengths",
        ),
        Study(
            "attention",
            rule_file="flash.smk",
            config="attention",
            rules={"attention_sweep": {**GPU_JOB, "runtime": 30, "mem_mb": 32000}},
            aggregates={"attention": "ATTENTION_SWEEP_TARGETS"},
            jobs=("ATTENTION_SWEEP_TARGETS",),
            figures=_figures(
                "Attention",
                {
                    "attention_sweep": """Naive attention at scale: forward and backward time and the memory
                        held for the backward pass against sequence length, eager and compiled, per head
                        size. From ``results/attention.csv``.""",
                },
            ),
            section="attention_section",
            title="Attention at scale",
            reads=("attention",),
            columns={"attention": COLUMNS["attention"]},
        ),
        Study(
            "flash",
            rule_file="flash.smk",
            config="flash",
            rules={
                "flash_leaderboard": {**GPU_JOB, "runtime": 15, "mem_mb": 32000},
                "flash_sweep": {**GPU_JOB, "runtime": 60, "mem_mb": 32000},
            },
            aggregates={"flash_sweep": "FLASH_SWEEP_TARGETS"},
            jobs=("FLASH_LEADERBOARD_TARGETS", "FLASH_SWEEP_TARGETS"),
            figures=_figures(
                "FlashAttention",
                {
                    "flash_tflops": """FlashAttention-2: achieved TFLOP/s of forward+backward (causal)
                        against sequence length, our Triton kernel beside PyTorch's implementations, per
                        dtype and head size. From ``results/flash_sweep.csv``.""",
                },
            ),
            section="flash_section",
            title="FlashAttention",
            reads=("flash/leaderboard", "flash_sweep"),
            columns={
                "flash/leaderboard": COLUMNS["flash/leaderboard"] | SETTINGS,
                "flash_sweep": COLUMNS["flash_sweep"] | SETTINGS,
            },
        ),
        Study(
            "allreduce",
            rule_file="distributed.smk",
            config="allreduce",
            rules={
                "allreduce": {
                    "gpu": lambda wildcards: allreduce_gpus(wildcards.backend, wildcards.world),
                    "cpus_per_task": lambda wildcards: max(8, int(wildcards.world)),
                    "runtime": 15,
                    "mem_mb": 64000,
                }
            },
            aggregates={"allreduce": "ALLREDUCE_TARGETS"},
            jobs=("ALLREDUCE_JOBS",),
            figures=_figures(
                "Communication",
                {
                    "allreduce_busbw": """All-reduce of float32 tensors, nccl-tests style: bus bandwidth
                        from the median of 100 timed iterations against tensor size, per backend and world
                        size. From ``results/allreduce.csv``.""",
                },
            ),
            section="comm_section",
            title="Communication",
            reads=("allreduce", "comm_fit"),
            columns={"allreduce": COLUMNS["allreduce"], "comm_fit": COLUMNS["comm_fit"]},
        ),
        Study(
            "ddp",
            rule_file="distributed.smk",
            config="ddp",
            rules={
                rule: {**DDP_JOB, "runtime": runtime}
                for rule, runtime in (("ddp_train", 30), ("ddp_sharding", 20), ("ddp_timeline", 20))
            },
            aggregates={
                "ddp_train": "DDP_TRAIN_TARGETS",
                "ddp/sharding": "DDP_SHARDING_TARGETS",
                "ddp/timeline": "DDP_TIMELINE_TARGETS",
            },
            jobs=("DDP_JOBS",),
            figures=_figures(
                "Data parallel",
                {
                    "ddp_timeline": """Data-parallel training: the GPU kernels of one traced step on rank 0,
                        per world size, DDP variant and CUDA stream; compute and NCCL communication in two colours, so
                        overlap, or its absence, shows. From ``results/ddp/timeline.csv``.""",
                },
            ),
            section="ddp_section",
            title="Data parallel training",
            reads=("ddp_train", "ddp/sharding", "comm_fit", "ddp/timeline", "allreduce"),
            columns={
                "ddp_train": COLUMNS["ddp_train"] | {"bucket_model_factor": float},
                "ddp/sharding": COLUMNS["ddp/sharding"] | {"sharding_saved_share": float},
                "ddp/timeline": COLUMNS["ddp/timeline"],
            },
        ),
        Study(
            "cost",
            config=None,
            rules={},
            section="cost",
            title="Cost of this run",
            reads=("cost",),
            columns={"cost": COLUMNS["cost"]},
        ),
    )
}


# The handout's deliverables that ask for numbers, in its order, then what lmperf measures beyond it:
# (name, what it asks, where the report answers it). A place is a study (its section) or the text of
# a "## " heading inside one. The report opens with this as its index (lmperf.report.render.index);
# tests check that every place named is a heading the report renders.
HANDOUT = (
    ("benchmarking_script", "forward and backward time per model size, with and without warm-up", ("e2e",)),
    (
        "nsys_profile",
        "(a)-(e): the forward's time against Python's timer, the kernels that take a step's time, and "
        "softmax against the matmuls inside attention",
        ("profile",),
    ),
    ("mixed_precision_accumulation", "adding 0.01 a thousand times in float32, float16 and mixed", ("precision",)),
    (
        "benchmarking_mixed_precision",
        "the dtypes autocast gives, normalization under it, and bf16 step times",
        ("precision", "e2e"),
    ),
    (
        "memory_profiling",
        "the 2.7B model's memory timeline and peak by context length, fp32 and bf16, and its largest allocations",
        ("memory",),
    ),
    ("pytorch_attention", "naive attention's time and memory by head size and sequence length", ("attention",)),
    (
        "torch_compile",
        "attention compiled, and the model compiled block by block, against eager",
        ("attention", "e2e"),
    ),
    ("flash_benchmarking", "our FlashAttention against PyTorch's attention, forward and backward", ("flash",)),
    ("distributed_communication_single_node", "all-reduce time by data size, ranks and backend", ("allreduce",)),
    ("naive_ddp_benchmarking", "one all-reduce per parameter after backward: step and communication time", ("ddp",)),
    ("minimal_ddp_flat_benchmarking", "one flat all-reduce of every gradient, against the naive one", ("ddp",)),
    (
        "ddp_overlap_individual_parameters_benchmarking",
        "per-parameter all-reduces during backward, against naive and flat, and their timeline",
        ("ddp",),
    ),
    (
        "ddp_bucketed_benchmarking",
        "step time by bucket size (1 to 1000 MB), and the best size as a fitted model predicts it",
        ("ddp",),
    ),
    (
        "communication_accounting",
        "XXL's memory, the devices FSDP needs, and when a TPU mesh is compute-bound",
        ("Communication accounting (XXL, computed)",),
    ),
    (
        "optimizer_state_sharding_accounting",
        "memory and step time with AdamW's state sharded and without, and against ZeRO stage 1",
        ("Optimizer state sharding",),
    ),
)
BEYOND_HANDOUT = (
    ("batch size", "where the host stops setting the step time", ("batch",)),
    ("the ladder", "one technique at a time, from the handout's step to the fastest we have", ("ladder",)),
    ("this run", "what the run cost, job by job and study by study", ("cost",)),
)


def heading(place: str) -> str:
    """The "## " heading of a place in HANDOUT: a study's section title, or the heading text itself."""
    return STUDIES[place].title if place in STUDIES else place


def sections() -> list[Study]:
    """The studies with a report section, in the report's order."""
    return [study for study in STUDIES.values() if study.section]


def declared(result: str) -> dict[str, type]:
    """The columns the rows of results/<result>.csv promise, with their types."""
    for study in STUDIES.values():
        if result in study.columns:
            return {**ROW, **ENV, **study.columns[result]}
    raise KeyError(f"no study declares the columns of {result!r}")


def rule_resources() -> dict[str, dict]:
    """Each measuring rule -> what its jobs ask of a Slurm cluster."""
    return {rule: wanted for study in STUDIES.values() for rule, wanted in study.rules.items()}


def config_schema(path: str | Path = "workflow/schemas/config.schema.yaml") -> dict:
    """The config schema with its name lists set from lmperf.grid (an enum named SIZES gets
    grid.SIZES), and a grid's required sections set to the studies' config keys."""
    import yaml

    schema = yaml.safe_load(Path(path).read_text())
    for definition in schema["$defs"].values():
        if isinstance(definition.get("enum"), str):
            definition["enum"] = list(getattr(grid, definition["enum"]))
    sections = schema["$defs"]["grid"]
    keys = [study.config for study in STUDIES.values() if study.config]
    if sorted(sections["properties"]) != sorted(keys):
        raise ValueError(f"the schema describes grid sections {sorted(sections['properties'])}, the studies {keys}")
    sections["required"] = keys
    return schema


def validate_config(config: dict, path: str | Path = "workflow/schemas/config.schema.yaml") -> None:
    """Raise jsonschema's ValidationError, naming the key and where it is, for a config the schema refuses."""
    from jsonschema import Draft202012Validator

    Draft202012Validator(config_schema(path)).validate(config)
