# lmperf: snakemake --cores 1 report/final.md
#
# `snakemake --lint` leaves two findings, both on purpose (tests/test_lint.py holds it to these):
# - "Specify a conda environment or container for each rule": every job runs in the environment
#   that runs Snakemake (`make env`, or a site's own torch build matched to its GPU driver); a conda
#   file we cannot test against a real GPU stack would be a promise, not a deployment.
# - "Absolute path /dev/nvidia[0-9]*" (common.smk): the device files are how a GPU is seen
#   without importing torch.
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("8.20")


configfile: "config.yaml"


try:
    validate(config, schema="workflow/schemas/config.schema.yaml")
except WorkflowError as error:  # say what is wrong and where, not the whole schema and config
    cause = error.__cause__ or error.__context__  # jsonschema's ValidationError
    if not hasattr(cause, "json_path"):
        raise
    raise WorkflowError(f"config: {cause.message}, at {cause.json_path}") from None


include: "workflow/rules/common.smk"
include: "workflow/rules/e2e.smk"
include: "workflow/rules/ladder.smk"
include: "workflow/rules/precision.smk"
include: "workflow/rules/flash.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/memory.smk"
include: "workflow/rules/distributed.smk"
include: "workflow/rules/report.smk"


localrules:
    all,
    aggregate,
    e2e_join,
    e2e_figures,
    ladder_figures,
    flash_figures,
    comm_figures,
    attention_figures,
    ddp_figures,
    comm_fit,
    cost,
    memory_figure,
    report,


# The default target: the report and every file it is made from, down to each job's measurement.
# Snakemake rebuilds a missing file only where a target names it: a file deleted under an up-to-date
# report (a forced rerun cut off deletes the outputs of the job it killed) would otherwise stay
# missing while the report still cites its rows. So `snakemake --cores 1` (this target), not
# `snakemake report/final.md`, is the run that repairs a cut-off one.
rule all:
    default_target: True
    input:
        "report/final.md",
        rules.report.input,
        [target for targets in AGGREGATES.values() for target in targets],
        ONE_GPU_TARGETS + ALLREDUCE_TARGETS + DDP_TARGETS,
