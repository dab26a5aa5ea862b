"""`snakemake --lint`: no finding but the two the Snakefile justifies at its top."""

import re

from conftest import ROOT, snakemake

JUSTIFIED = ("Specify a conda environment or container for each rule", 'Absolute path "/dev/nvidia[0-9]*"')


def test_snakemake_lint_finds_only_what_the_snakefile_justifies():
    proc = snakemake(ROOT, "--lint", "--config", "grid=smoke", check=False)
    findings = re.findall(r"^\s*\* (.+?)(?: in line \d+)?:$", proc.stdout + proc.stderr, flags=re.M)
    assert findings, "no lint output parsed: has snakemake --lint changed its format?"
    unexpected = sorted({f for f in findings if not f.startswith(JUSTIFIED)})
    assert not unexpected, unexpected
    assert not any("directly uses variable" in f for f in findings)
