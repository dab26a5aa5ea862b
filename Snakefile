# lmperf: snakemake --cores 1 report/final.md
#
# `snakemake --lint` leaves two findings, both on purpose (tests/test_lint.py holds it to these):
# - "Specify a conda environment or container for each rule": every job runs in the environment
#   that runs Snakemake (`make env`, or a site's own torch build matched to its GPU driver); a conda
#   file we cannot test against a real GPU stack would be a promise, not a deployment.
# - "Absolute path /dev/nvidia[0-9]*" (common.smk): the device files are how a GPU is seen
#   without importing torch.
from snakemake.utils import min_version, validate

min_version("8.20")


configfile: "config.yaml"


validate(config, schema="workflow/schemas/config.schema.yaml")


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


rule all:
    default_target: True
    input:
        "report/final.md",
