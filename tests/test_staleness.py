"""Stale means stale: on a finished smoke run, an edit reruns exactly what it changes.

- every leaf key of the smoke grid, edited alone, schedules the rules that read it (and what is
  downstream of their targets), nothing else;
- an edit to each study's module reruns that study alone;
- every lmperf module a job of the smoke run imported is among its rule's inputs, and no measuring
  job imports lmperf.report.
"""

import fnmatch
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, clone_run, dry_run, dry_run_jobs, recorded_processes, touch_source
from lmperf.registry import STUDIES, rule_resources

pytestmark = pytest.mark.slow

# The rules that read each config key of a grid: a section's rules, then the exceptions. This is the
# specification the rules are held to; a key that moves between rules must move here too.
READERS = {
    "e2e": {"e2e"},
    "batch": {"batch"},
    "e2e.batch_size": {"e2e", "warmup"},  # warm-up runs at the e2e batch size
    # the timed turns; rule ladder (the checks and profiles) reruns downstream of them, and Snakemake then
    # reports only that reason, also for the keys it reads itself (batch_size, settle_seconds)
    "ladder": {"ladder_timed"},
    "ladder.check_steps": {"ladder"},
    "ladder.loss_tolerance": {"ladder"},  # the checks' targets, written on the checked rows
    "ladder.power_limit_share": {"ladder"},
    "warmup": {"warmup"},
    "flash.leaderboard": {"flash_leaderboard"},
    "flash.sweep": {"flash_sweep"},
    "attention": {"attention_sweep"},
    "allreduce": {"allreduce"},
    "profile": {"profile"},
    "memory": {"memory"},
    # memory.size is in the timeline figure's title too, but the figure reruns anyway, downstream of the
    # memory targets (Snakemake then reports only that reason)
    "ddp": {"ddp_train", "ddp_sharding", "ddp_timeline"},
    "ddp.variants": {"ddp_train"},
    "ddp.timeline_variants": {"ddp_timeline"},
    "ddp.global_batches": {"ddp_train"},  # an added larger batch is a new train target; the others run the smallest
    "ddp.bucket_model_factor": {"ddp_train"},
    "ddp.sharding_saved_share": {"ddp_sharding"},
}
# Keys whose values name targets (a wildcard): an edit adds targets, or removes some and reruns none.
TARGET_KEYS = {
    "batch.sizes",
    "e2e.sizes",
    "e2e.precisions",
    "e2e.compile",
    "e2e.compile_precisions",
    "ladder.sizes",
    "ladder.context_lengths",
    "warmup.sizes",
    "warmup.modes",
    "warmup.warmup_steps",
    "warmup.processes",
    "flash.sweep.head_dims",
    "flash.sweep.dtypes",
    "attention.head_dims",
    "attention.compile",
    "allreduce.gloo_world_sizes",
    "allreduce.nccl_world_sizes",
    "profile.sizes",  # one target per size: its modes and contexts are the job's params
    "memory.context_lengths",
    "memory.modes",
    "memory.precisions",
    "ddp.global_batches",
    "ddp.world_sizes",
}
# Keys whose params reach only the jobs of their rule whose output matches a glob: the attention list
# reaches only the e2e targets that compare attentions (e2e.attention_precisions: bf16 on the smoke
# grid), and taking bf16 out of that list changes just those.
SOME_JOBS = {"e2e.attention": "results/e2e/*/bf16-*", "e2e.attention_precisions": "results/e2e/*/bf16-*"}
# Keys the smoke grid reads nowhere, and why.
UNUSED_ON_SMOKE = {"allreduce.max_bytes": "only NCCL targets read it, and the smoke grid has none"}

# An edit per kind of value. Lists get a new item; a list that already holds every allowed value loses
# its last one.
NEW_ITEMS = {
    "sizes": "small",
    "modes": "train_step",
    "attention": "sdpa",
    "dtypes": "fp32",
    "implementations": "naive",
    "head_dims": 32,
    "timeline_variants": "flat",
    "compile_precisions": "fp32",  # at least one: an added precision is new compiled targets
}
SWAPS = {"lmperf": "torch_fused", "auto": "torch", "nano": "tiny", "bf16": "fp32", "compiled": "eager", "naive": "sdpa"}

# A job rerun only because its inputs are rerun or the set of targets it gathers changed; the cost
# tally's params (one GPU count per measuring job) follow that set too.
DOWNSTREAM = ("Input files updated by another job", "Set of input files has changed")


def leaves(tree: dict, path: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, (*path, key))
        else:
            yield (*path, key), value


def edited(key: str, value):
    """(new value, kind of edit): 'params' for a value rules pass on; 'added' or 'removed' for targets."""
    name = key.rsplit(".", 1)[-1]
    if isinstance(value, bool):
        new = not value
    elif isinstance(value, (int, float)):
        # a fraction halves (a share stays at most 1), a factor doubles (it stays above 1), a count grows
        new = (value / 2 if value < 1 else value * 2) if isinstance(value, float) else value + 1
    elif isinstance(value, str):
        new = SWAPS[value]
    elif name in NEW_ITEMS and NEW_ITEMS[name] not in value:
        new = [*value, NEW_ITEMS[name]]
    elif not value or all(isinstance(v, int) for v in value):
        new = [*value, max(value, default=1) + 1]
    else:
        new = value[:-1]
    if key not in TARGET_KEYS:
        return new, "params"
    return new, "removed" if isinstance(new, list) and len(new) < len(value) else "added"


def readers(key: str) -> set[str]:
    while key not in READERS:
        key = key.rsplit(".", 1)[0]
    return READERS[key]


def direct(job: dict) -> bool:
    """Scheduled for its own sake (params, its own missing output, an edited input), not for upstream's."""
    return not any(reason in job["reason"] for reason in DOWNSTREAM) or (
        "Params have changed" in job["reason"] and job["rule"] != "cost"
    )


@pytest.fixture(scope="module")
def smoke_clone(smoke_run, tmp_path_factory):
    return clone_run(smoke_run, tmp_path_factory.mktemp("config-edits"))


def test_every_config_key_reruns_exactly_the_rules_that_read_it(smoke_clone):
    grid = yaml.safe_load((ROOT / "config.yaml").read_text())["grids"]["smoke"]
    all_jobs = dry_run_jobs(smoke_clone, "--forceall", "--config", "grid=smoke")
    per_rule = {rule: sum(j["rule"] == rule for j in all_jobs) for rule in {j["rule"] for j in all_jobs}}

    def check(item):
        path, value = item
        key = ".".join(path)
        new, kind = edited(key, value)
        overlay = smoke_clone / f"edit-{key}.yaml"
        overlay.write_text(yaml.safe_dump({"grids": {"smoke": _nested(path, new)}}))
        jobs = dry_run_jobs(smoke_clone, "--configfile", str(overlay), "--config", "grid=smoke")
        return key, kind, jobs

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(check, leaves(grid)))

    problems, unused = [], []
    for key, kind, jobs in results:
        if not jobs:
            unused.append(key)
            continue
        hit = {j["rule"] for j in jobs if direct(j)}
        expected = set() if kind == "removed" else readers(key)
        if hit != expected:
            problems.append(f"{key} ({kind}): scheduled {sorted(hit)} for itself, expected {sorted(expected)}")
        if kind == "params":
            for rule in expected:
                rerun = {j["output"] for j in jobs if j["rule"] == rule and "Params have changed" in j["reason"]}
                want = {j["output"] for j in all_jobs if j["rule"] == rule}
                if key in SOME_JOBS:
                    want = {out for out in want if fnmatch.fnmatch(out, SOME_JOBS[key])}
                if rerun != want:
                    problems.append(f"{key}: {len(rerun)} of {per_rule[rule]} {rule} jobs rerun for changed params")
    assert not problems, "\n".join(problems)
    assert sorted(unused) == sorted(UNUSED_ON_SMOKE), f"keys no rule reads: {sorted(unused)}"


def test_results_measured_on_another_device_are_rerun(smoke_clone):
    """The smoke run measured on this CPU. Run where the jobs get a GPU (device=cuda, as profiles/slurm
    says), every measuring job reruns, its params naming the device, and nothing else for its own sake:
    no CPU-measured row stays current for a GPU report."""
    measuring = {
        j["output"] for j in dry_run_jobs(smoke_clone, "--forceall", "--config", "grid=smoke") if j["benchmark"]
    }
    jobs = dry_run_jobs(smoke_clone, "--config", "grid=smoke", "device=cuda")
    assert measuring <= {j["output"] for j in jobs}
    # rule ladder is downstream of ladder_timed: Snakemake then reports only that reason
    assert {j["output"] for j in jobs if direct(j)} == {j["output"] for j in jobs if j["rule"] != "ladder"} & measuring
    assert all("Params have changed" in j["reason"] for j in jobs if direct(j))
    assert dry_run(smoke_clone, "--config", "grid=smoke", "device=cpu") == {}  # what device=auto chose here


def _nested(path: tuple, value) -> dict:
    tree = value
    for key in reversed(path):
        tree = {key: tree}
    return tree


# Each study's module -> the rules that run it.
STUDY_RULES = {
    "studies/e2e.py": {"e2e", "warmup"},
    "studies/batch.py": {"batch"},
    "studies/ladder.py": {"ladder_timed"},  # and rule ladder downstream of it
    "studies/precision.py": {"precision"},
    "studies/flash.py": {"flash_leaderboard", "flash_sweep"},
    "studies/attention_sweep.py": {"attention_sweep"},
    "studies/allreduce.py": {"allreduce"},
    "studies/profile.py": {"profile"},
    "studies/memory.py": {"memory"},
    "studies/ddp.py": {"ddp_train", "ddp_sharding", "ddp_timeline"},
}


def test_every_measuring_rule_of_the_studies_is_held_to_its_module():
    """A study added to lmperf.registry comes with its line above; every config section it reads too."""
    downstream = {"ladder", "e2e_context"}  # rerun downstream of ladder_timed; a part of rule e2e
    assert set().union(*STUDY_RULES.values()) | downstream == set(rule_resources())
    assert {study.config for study in STUDIES.values() if study.config} == {key.split(".")[0] for key in READERS}


@pytest.mark.parametrize("module", sorted(STUDY_RULES))
def test_editing_a_study_reruns_that_study_alone(smoke_run, tmp_path, module):
    run = clone_run(smoke_run, tmp_path)
    touch_source(run / "src/lmperf" / module)
    jobs = dry_run_jobs(run, "--config", "grid=smoke")
    assert {j["rule"] for j in jobs if direct(j)} == STUDY_RULES[module]
    assert all("Updated input files" in j["reason"] for j in jobs if direct(j))


def test_editing_the_model_reruns_only_what_depends_on_it(smoke_run, tmp_path):
    run = clone_run(smoke_run, tmp_path)
    touch_source(run / "src/lmperf/model/transformer.py")
    jobs = dry_run(run, "--config", "grid=smoke")
    for rule in ("e2e", "ladder", "warmup", "profile", "memory", "ddp_train", "ddp_sharding", "ddp_timeline"):
        assert rule in jobs  # they build the model
    for rule in ("precision", "flash_leaderboard", "flash_sweep", "attention_sweep", "allreduce"):
        assert rule not in jobs  # they do not
    assert jobs["e2e"] == 6  # 2 sizes x (fp32 eager, bf16 eager, bf16 compiled)
    assert jobs["warmup"] == 4  # 2 modes x 2 processes, each timing every warm-up count


def test_editing_plotting_code_reruns_only_figures_and_report(smoke_run, tmp_path):
    run = clone_run(smoke_run, tmp_path)
    touch_source(run / "src/lmperf/report/e2e_figures.py")
    assert dry_run(run, "--config", "grid=smoke") == {"e2e_figures": 1, "report": 1}


def test_editing_report_text_reruns_only_the_report(smoke_run, tmp_path):
    run = clone_run(smoke_run, tmp_path)
    touch_source(run / "src/lmperf/report/e2e_section.py")
    assert dry_run(run, "--config", "grid=smoke") == {"report": 1}


def test_editing_the_triton_kernel_leaves_naive_targets_alone(smoke_run, tmp_path):
    run = clone_run(smoke_run, tmp_path)
    touch_source(run / "src/lmperf/kernels/flash_attention.py")
    # the smoke grid's e2e times naive and flash_pytorch attention: neither runs the Triton kernel
    assert dry_run(run, "--config", "grid=smoke") == {
        "flash_leaderboard": 1,
        "flash_sweep": 1,
        "ladder_timed": 1,  # its flash rungs time the kernel (on a GPU)
        "ladder": 1,
        "aggregate": 3,  # flash_sweep, ladder and ladder_kernels
        "cost": 1,
        "flash_figures": 1,
        "ladder_figures": 1,
        "report": 1,
    }


def test_every_module_a_job_imported_is_among_its_inputs(smoke_run):
    """What ran (each process's sys.modules, recorded by tests/record_imports) against what the rule
    lists (code(), read from the imports without running anything): an independent check."""
    recorded: dict[str, set[str]] = {}
    for entry, files, _argv in recorded_processes(smoke_run):
        recorded.setdefault(entry, set()).update(str(Path(f).relative_to(smoke_run)) for f in files)
    jobs = dry_run_jobs(smoke_run, "--forceall", "--config", "grid=smoke")
    checked = set()
    for job in jobs:
        # lmperf.gpu_slots, the first word of every measuring job, picks the job's GPUs and execs its
        # command: it changes no result, so it is no input (and, exec'd away, records nothing)
        for entry in (w for w in job["shell"].split() if w.startswith("lmperf.") and w != "lmperf.gpu_slots"):
            assert entry in recorded, f"no process of the smoke run recorded {entry}"
            missing = recorded[entry] - set(job["input"].split(", "))
            assert not missing, (
                f"rule {job['rule']} runs {entry}, which imported {sorted(missing)}: not among its inputs"
            )
            checked.add(entry)
            if entry.startswith("lmperf.studies."):
                assert not any(f.startswith("src/lmperf/report/") for f in recorded[entry]), (
                    f"{entry} imports the report"
                )
    assert {f"lmperf.studies.{Path(m).stem}" for m in STUDY_RULES} <= checked
    assert {"lmperf.report.render", "lmperf.report.cost", "lmperf.distributed.torchrun"} <= checked
