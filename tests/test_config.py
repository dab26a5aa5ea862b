import copy
import re
import shutil
from collections import Counter

import pytest
import yaml
from jsonschema import ValidationError

from conftest import ROOT, copy_pipeline, dry_run, dry_run_jobs, snakemake
from lmperf import grid
from lmperf.registry import STUDIES, config_schema, validate_config
from lmperf.report import flash_section

SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())


def test_shipped_config_is_valid():
    validate_config(copy.deepcopy(CONFIG), SCHEMA)


def test_the_schema_takes_its_names_from_the_grid_and_its_sections_from_the_studies():
    """A size the grid lists is one the schema takes, and one it does not list is refused; a grid
    lacking a study's section is refused, naming it."""
    schema = config_schema(SCHEMA)
    assert schema["$defs"]["size"]["enum"] == list(grid.SIZES)
    assert schema["$defs"]["ddp_variant"]["enum"] == list(grid.DDP_VARIANTS)
    config = copy.deepcopy(CONFIG)
    del config["grids"]["smoke"][STUDIES["ddp"].config]
    with pytest.raises(ValidationError, match="'ddp' is a required property"):
        validate_config(config, SCHEMA)


def _with(path, value):
    config = copy.deepcopy(CONFIG)
    *parents, last = path
    node = config
    for key in parents:
        node = node[key]
    node[last] = value
    return config


@pytest.mark.parametrize(
    "path, value, named",
    [
        (["grids", "full", "e2e", "sizes"], ["small", "huge"], "'huge'"),
        (["grids", "smoke", "e2e", "warmup_steps"], -1, "warmup_steps"),
        (["grids", "smoke", "e2e", "measured_steps"], "ten", "measured_steps"),
        (["grids", "full", "warmup", "context_length"], 0, "context_length"),
        (["grid"], "medium", "grid"),
    ],
)
def test_bad_config_is_rejected_naming_the_key(path, value, named):
    with pytest.raises(ValidationError) as error:
        validate_config(_with(path, value), SCHEMA)
    assert named in str(error.value)


def test_unknown_key_is_rejected():
    config = _with(["grids", "smoke", "e2e", "steps"], 3)
    with pytest.raises(ValidationError, match="steps"):
        validate_config(config, SCHEMA)


def _sections(tree, path=()):
    """The path of every mapping in the config, the config itself included."""
    yield path
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _sections(value, (*path, key))


@pytest.mark.parametrize("path", list(_sections(CONFIG)), ids=lambda path: ".".join(path) or "top")
def test_a_misspelled_key_is_named_as_unknown(path):
    """A typo of a required key is reported as the unknown key it is, not as the key it replaced missing."""
    config = copy.deepcopy(CONFIG)
    section = config
    for key in path:
        section = section[key]
    key = next(iter(section))
    section[key + key[-1]] = section.pop(key)  # a doubled last letter
    with pytest.raises(ValidationError) as error:
        validate_config(config, SCHEMA)
    assert f"'{key + key[-1]}' was unexpected" in str(error.value)


def test_snakemake_refuses_a_bad_config_file(tmp_path):
    workdir = copy_pipeline(tmp_path)
    (workdir / "bad.yaml").write_text(yaml.safe_dump(_with(["grids", "full", "e2e", "sizes"], ["gigantic"])))
    proc = snakemake(workdir, "-n", "--configfile", "bad.yaml", check=False)
    assert proc.returncode != 0
    assert "gigantic" in proc.stdout + proc.stderr


def test_reference_overlay_selects_what_the_reference_run_measured(tmp_path):
    """The committed reference grid: the full grid with narrowed world sizes and fp32 at xl and 2.7B
    split by context, as a dry run."""
    workdir = copy_pipeline(tmp_path)
    counts = dry_run(workdir, "--configfile", "config.yaml", str(ROOT / "report/reference/h100.yaml"))
    # 5 sizes x 2 precisions x 2 compile modes, the attentions inside each; 4 of them one job per context
    assert (counts["e2e"], counts["e2e_context"], counts["e2e_join"]) == (16, 4 * 4, 4)
    assert counts["flash_sweep"] == 8
    assert counts["allreduce"] == 3
    assert counts["ddp_train"] == 2
    assert counts["profile"] == 5  # one per size, each profiling 4 contexts x 2 modes (Nsight Systems on the H100)
    assert counts["memory"] == 12


def test_profile_exclude_drops_the_targets_its_globs_match(tmp_path):
    """profile.exclude takes globs, like e2e.exclude: the excluded targets are not scheduled."""
    workdir = copy_pipeline(tmp_path)
    (workdir / "narrow.yaml").write_text(
        yaml.safe_dump(
            {
                "grid": "full",
                "grids": {"full": {"profile": {"exclude": ["results/profile/xl.csv", "*/2.7B.csv"]}}},
            }
        )
    )
    counts = dry_run(workdir, "--configfile", "config.yaml", "narrow.yaml")
    assert counts["profile"] == 5 - 2  # xl's target and 2.7B's


def test_the_report_names_what_the_exclude_lists_left_out(tmp_path):
    """An overlay that drops targets by glob hands them to the report, which lists them as not measured."""
    workdir = copy_pipeline(tmp_path)
    narrow = {"grid": "full", "grids": {"full": {"e2e": {"exclude": ["results/e2e/2.7B/bf16-*"]}}}}
    (workdir / "narrow.yaml").write_text(yaml.safe_dump(narrow))
    report = next(
        job for job in dry_run_jobs(workdir, "--configfile", "config.yaml", "narrow.yaml") if job["rule"] == "report"
    )
    missing = re.findall(r"--missing (\S+)", report["shell"])
    assert missing == ["results/e2e/2.7B/bf16-eager.csv", "results/e2e/2.7B/bf16-compiled.csv"]
    from lmperf.report.render import left_out

    assert left_out(missing)[0] == (
        "Not measured in this run (the grid's `exclude` lists): "
        "`results/e2e/2.7B/bf16-eager.csv`, `results/e2e/2.7B/bf16-compiled.csv`."
    )
    assert left_out([]) == []


def test_e2e_exclude_must_be_a_list_of_globs():
    with pytest.raises(ValidationError, match="exclude"):
        validate_config(_with(["grids", "full", "e2e", "exclude"], "results/e2e/*"), SCHEMA)


def test_the_wide_overlay_adds_back_what_the_full_grid_leaves_out(tmp_path):
    """wide.yaml: the ladder at all five sizes, fp32 compiled e2e targets, DDP at global batch 4 and
    the tiled PyTorch FlashAttention in the sweep."""
    workdir = copy_pipeline(tmp_path)
    shutil.copy(ROOT / "wide.yaml", workdir)
    full_jobs = dry_run_jobs(workdir, "--config", "grid=full")
    wide_jobs = dry_run_jobs(workdir, "--configfile", "config.yaml", "wide.yaml")
    full, wide = (dict(Counter(job["rule"] for job in jobs)) for jobs in (full_jobs, wide_jobs))

    def sweep_implementations(jobs):
        return {re.search(r"--implementations (\S+)", j["shell"]).group(1) for j in jobs if j["rule"] == "flash_sweep"}

    kept = [name for name in grid.FLASH_IMPLEMENTATIONS if name not in flash_section.FULL_GRID_LEAVES_OUT]
    assert sweep_implementations(full_jobs) == {",".join(kept)}  # the report's reason names what config.yaml drops
    assert sweep_implementations(wide_jobs) == {",".join(grid.FLASH_IMPLEMENTATIONS)}
    assert (full["e2e"], full["ladder_timed"], full["ladder"], full["ddp_train"]) == (15, 4, 4, 2)
    assert (wide["e2e"], wide["ladder_timed"], wide["ladder"], wide["ddp_train"]) == (20, 10, 10, 4)
    assert {k: v for k, v in wide.items() if k not in ("e2e", "ladder_timed", "ladder", "ddp_train")} == {
        k: v for k, v in full.items() if k not in ("e2e", "ladder_timed", "ladder", "ddp_train")
    }


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_device_setting_decides_where_the_studies_measure(tmp_path, device):
    """Every study that takes --device is told the grid's device, which also files its results."""
    jobs = dry_run_jobs(copy_pipeline(tmp_path), "--forceall", "--config", "grid=smoke", f"device={device}")
    studies = [job for job in jobs if "python -m lmperf.studies." in job["shell"]]
    told = {job["rule"] for job in studies if f"--device {device} " in job["shell"]}
    assert told == {job["rule"] for job in studies} - {"flash_leaderboard", "flash_sweep", "precision"}
    assert {"e2e", "warmup", "batch", "ladder_timed", "ladder", "memory", "profile", "attention_sweep"} <= told


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--context-lengths", "32,64,32", "32 named twice in '32,64,32'"),
        ("--attention", "naive,naive", "naive named twice"),
    ],
)
def test_a_study_refuses_a_point_named_twice(capsys, flag, value, said):
    """A point named twice would be measured twice and written as two rows of one point."""
    from lmperf.studies import e2e

    args = ["--size", "nano", "--context-lengths", "32", "--attention", "naive", "--out", "x.csv"]
    args[args.index(flag) + 1] = value
    with pytest.raises(SystemExit):
        e2e.main(args)
    assert f"argument {flag}: {said}" in capsys.readouterr().err
