# lmperf: snakemake --cores 1 report/final.md
from snakemake.utils import min_version, validate

min_version("8.20")


configfile: "config.yaml"


validate(config, schema="workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/e2e.smk"
include: "workflow/rules/precision.smk"
include: "workflow/rules/flash.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/memory.smk"
include: "workflow/rules/distributed.smk"
include: "workflow/rules/report.smk"


localrules:
    all,
    aggregate,
    e2e_figures,
    flash_figures,
    comm_figures,
    attention_figures,
    ddp_figures,
    comm_fit,
    memory_figure,
    report,


rule all:
    input:
        "report/final.md",
    default_target: True
