# lmperf: snakemake --cores all   (the default target: the report and every file it is made from)
#
# `snakemake --lint` leaves two findings, both on purpose (tests/test_lint.py holds it to these):
# - "Specify a conda environment or container for each rule": every job runs in the environment
#   that runs Snakemake (`make env`, or a site's own torch build matched to its GPU driver); a conda
#   file we cannot test against a real GPU stack would be a promise, not a deployment.
# - "Absolute path /dev/nvidia[0-9]*" (common.smk): the device files are how a GPU is seen
#   without importing torch.
import os
import sys

from jsonschema import ValidationError
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

sys.path.insert(0, os.path.abspath("src"))  # lmperf.registry and lmperf.grid import no torch: the DAG builds fast
from lmperf.registry import STUDIES, rule_resources, validate_config
from lmperf.report.projection import priorities

min_version("9.17")  # a rule priority given as a function (the run's order, below)


configfile: "config.yaml"


try:  # the schema's name lists and study sections are lmperf.grid's and lmperf.registry's
    validate_config(config)
except ValidationError as error:  # say what is wrong and where, not the whole schema and config
    raise WorkflowError(f"config: {error.message}, at {error.json_path}") from None


include: "workflow/rules/common.smk"


for rule_file in dict.fromkeys(study.rule_file for study in STUDIES.values() if study.rule_file):

    include: f"workflow/rules/{rule_file}"


include: "workflow/rules/report.smk"


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
        list(JOB_GPUS),


# Every rule but the studies' measuring ones (lmperf.registry, which gives a cluster what their jobs
# ask for) runs on the host that runs Snakemake: joining, aggregating, drawing, rendering.
workflow.localrules(*(rule.name for rule in workflow.rules if rule.name not in rule_resources()))


# The jobs that hold more GPUs first, then the longest first, the order the projected wall time assumes
# (lmperf.report.projection.priority says why): each measuring job's priority comes from its GPUs and
# its projected seconds, from the reference's measured costs and, where an earlier run left it, this
# run's own (results/cost.csv).
PRIORITIES = priorities(BENCHMARK_GPUS, ["report/reference/one-allocation/job_costs.csv", "results/cost.csv"])
for measuring in workflow.rules:
    if measuring.name in rule_resources() and measuring.benchmark:
        measuring.priority = lambda wildcards, benchmark=measuring.benchmark: PRIORITIES.get(
            str(benchmark.apply_wildcards(wildcards)), 0
        )
