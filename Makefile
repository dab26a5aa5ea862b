# make report: create .venv and run the pipeline on the default grid (grid: auto in config.yaml)
# make test:   create .venv, check lint and formatting, and run the tests (CPU only)
# TORCH selects the torch requirement: the default pins the version CI uses (pip takes the build
# its index serves; CI's is the CPU build); on a GPU machine
# use e.g. `make report TORCH=torch`, or an existing environment (`make report VENV=/path/to/env TORCH=torch`:
# without TORCH=torch the install would replace that environment's torch with the pinned version).
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
CORES ?= all
GPU ?= h100
BIN := $(VENV)/bin

.PHONY: env report test lint dryrun bench-dag reference clean

env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH)" -e ".[test,lint,slurm]"
	touch $@

# The default target (rule all): the report and every file it is made from, so that a run cut off
# and run again remakes whatever it lost.
report: env
	$(BIN)/snakemake --cores $(CORES)

test: lint
	$(BIN)/python -m pytest -q

# Formatting (ruff format, snakefmt; line length 120) and ruff's lint; fails on any finding.
# (snakemake --lint is checked by tests/test_lint.py.)
lint: env
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/snakefmt --check Snakefile workflow/rules

dryrun: env
	$(BIN)/snakemake -n

# The pipeline's own overhead: building the full grid's DAG, and a rerun with nothing to do
# (run `make report` first so that the second finds everything up to date).
bench-dag: env
	@bash -c 'TIMEFORMAT="full-grid DAG, dry run: %R s"; time $(BIN)/snakemake -n --config grid=full > /dev/null'
	@bash -c 'TIMEFORMAT="no-op rerun of the default grid: %R s"; time $(BIN)/snakemake --cores 1 2>&1 | grep -q "Nothing to be done"'

# Copy a finished run (made by the pipeline, on real hardware) to report/reference/$(GPU)/: the report,
# its figures and the CSVs it is rendered from. Only those files are replaced; the folder's other files
# (a README, earlier slices) stay for you to keep or remove.
reference:
	test -f report/final.md
	mkdir -p report/reference/$(GPU)/precision
	rm -rf report/reference/$(GPU)/figures
	cp -r report/final.md report/figures report/reference/$(GPU)/
	cp results/*.csv results/flash/leaderboard.csv results/ddp/sharding.csv results/ddp/timeline.csv report/reference/$(GPU)/
	cp results/precision/*.csv report/reference/$(GPU)/precision/

clean:
	rm -rf results logs benchmarks report/final.md report/figures .snakemake
