# Helpers shared by every study: the grid in force, code dependencies, wildcard constraints.
import ast
import fnmatch
import functools
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from lmperf import grid
from lmperf.gpu_slots import visible_gpus  # no torch: the DAG builds fast
from lmperf.registry import STUDIES, allreduce_gpus, rule_resources

# The `device` resource: the GPUs of the machine (a CPU run has one device, the CPU), so a local run
# starts as many one-GPU measuring jobs at once as there are GPUs, and lmperf.gpu_slots gives each job
# GPUs of its own. `--resources device=N` on the command line limits them.
GPUS = visible_gpus()
if "device" not in workflow.global_resources:
    workflow.register_resource("device", max(len(GPUS), 1))


def devices(gpus):
    """The `device` resource of a measuring job that uses `gpus` GPUs. On a machine with no GPU every
    measuring job holds the one device, the CPU, so no two measurements overlap."""
    return gpus if GPUS else 1


# The kind of device the measuring jobs run on. Each measuring rule has it as params.device, so a result
# measured on a CPU is rerun, by Snakemake's params trigger, when the jobs move to a GPU (and back). A
# cluster profile names it: the host that builds the DAG need not have the GPUs its jobs get.
DEVICE = config["device"] if config["device"] != "auto" else ("cuda" if GPUS else "cpu")
GRID_NAME = config["grid"] if config["grid"] != "auto" else ("full" if DEVICE == "cuda" else "smoke")
GRID = config["grids"][GRID_NAME]
E2E = GRID["e2e"]
WARMUP = GRID["warmup"]

# Every job runs `python -m lmperf...`: the interpreter that runs Snakemake, put first on PATH, with
# the package imported from src/, installed or not. Bash in strict mode, as Snakemake's own default.
# (Snakemake formats the prefix: {{ }} are literal braces.)
INTERPRETER_DIR = os.path.dirname(sys.executable)
if not shutil.which("python", path=INTERPRETER_DIR):
    raise WorkflowError(f"jobs run `python`, but {INTERPRETER_DIR} has none: run Snakemake from a virtual environment")
#
# Every job compiles into one cache in the run's directory (.cache/compile/), unless the environment
# names its own (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR). Torch and Triton already share a cache
# between jobs on one machine (under /tmp and ~/.triton); this one also serves Slurm jobs on other
# nodes of a shared file system and later runs in the same checkout. It is not part of a run's state
# tarball: a fresh checkout compiles again. Both write cache entries by atomic rename, so concurrent
# jobs share it safely. A warm cache took up to 28-33% off e2e and ladder jobs
# (report/reference/one-allocation/).
INDUCTOR_CACHE, TRITON_CACHE = (
    os.path.abspath(os.path.join(".cache", "compile", kind)) for kind in ("inductor", "triton")
)
shell.prefix(
    f"set -euo pipefail; export PATH={shlex.quote(INTERPRETER_DIR)}:$PATH"
    f" PYTHONPATH={shlex.quote(os.path.abspath('src'))}${{{{PYTHONPATH:+:$PYTHONPATH}}}}"
    f" TORCHINDUCTOR_CACHE_DIR=${{{{TORCHINDUCTOR_CACHE_DIR:-{shlex.quote(INDUCTOR_CACHE)}}}}}"
    f" TRITON_CACHE_DIR=${{{{TRITON_CACHE_DIR:-{shlex.quote(TRITON_CACHE)}}}}}; "
)


@functools.cache
def module_file(name):
    """src/ path of an lmperf module or package ("lmperf.model" -> src/lmperf/model/__init__.py), or None."""
    path = Path("src", *name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def statements(node, into_functions):
    """The statements under ``node`` (imports are statements: expressions are not searched), those in
    function bodies only if ``into_functions``: the rest run when the module is imported."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not into_functions:
            continue
        if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield child
            yield from statements(child, into_functions)


@functools.cache
def syntax_tree(name):
    """Module ``name``'s source parsed, once per DAG build (both readings of imports use it)."""
    path = module_file(name)
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def imported_modules(name, everywhere):
    """The lmperf modules that module ``name`` imports, with their parent packages (which import runs too).

    everywhere=False reads only the imports that run on import; True also those inside functions.
    """
    tree = syntax_tree(name)
    found = set()
    for node in statements(tree, into_functions=everywhere):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]  # a name may be a module
        else:
            continue
        for full in names:
            parts = full.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if parts[0] == "lmperf")
    return frozenset(m for m in found if module_file(m))


def code(*entry_points):
    """Source files that running these lmperf modules executes, found by reading their imports (AST, no torch).

    An entry point's every import counts, its functions' included: its main() runs them. What it
    imports counts with the imports that run on import, transitively. So a lazy import inside a
    library function (the FlashAttention kernels, in lmperf.attention) is not a dependency of every model
    target; a study that runs it names that module as an entry point.
    """
    unknown = [name for name in entry_points if not module_file(name)]
    if unknown:
        raise ValueError(f"code(): no module {', '.join(unknown)} under src/")
    seen = set(entry_points)
    parents = [".".join(name.split(".")[:i]) for name in entry_points for i in range(1, name.count(".") + 1)]
    todo = parents + [module for name in entry_points for module in imported_modules(name, everywhere=True)]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += imported_modules(name, everywhere=False)
    return sorted(str(module_file(name)) for name in seen)


# The kernel module of each attention variant that lmperf.attention imports only when the variant runs;
# the other variants' code is imported with lmperf.attention itself, so code() finds it.
LAZY_ATTENTION_MODULES = {"flash_triton": "lmperf.kernels.flash_attention"}


def attention_modules(names):
    """The kernel modules these attention variants run beyond lmperf.attention's own imports, so an edit
    to the FlashAttention kernels reruns only the targets that time them."""
    return [LAZY_ATTENTION_MODULES[name] for name in names if name in LAZY_ATTENTION_MODULES]


# The figures the studies declare (lmperf.registry), by name.
FIGURES = {name: figure for study in STUDIES.values() for name, figure in study.figures.items()}


def caption(name):
    """The caption file of a figure, written from its declaration (only where its text changed, so an
    unchanged caption leaves the file alone)."""
    path = Path(".snakemake/captions", f"{name}.rst").absolute()
    text = f"{FIGURES[name].caption}\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(path)


def figure(name, path=None, **labels):
    """A study's figure as a `snakemake --report` item, with its declared caption and category; ``path``
    for a figure drawn once per target (default report/figures/<name>.png)."""
    return report(
        path or f"report/figures/{name}.png", caption=caption(name), category=FIGURES[name].category, **labels
    )


# Slurm: what each measuring rule's jobs ask for (lmperf.registry), requested by a profile for a
# cluster's GPUs: one whose default resources name a slurm_gpu_model (profiles/slurm), the GRES type
# of the GPUs asked for ('' for any). It holds whatever --config says: the host that builds the DAG
# need not see a GPU, and a `--config grid=...` on the command line replaces the profile's config
# list, its device=cuda included. A local run, or the CPU cluster profile, requests none of it.
DEFAULTS = workflow.resource_settings.default_resources
DEFAULT_RESOURCES = dict(arg.split("=", 1) for arg in DEFAULTS.args) if DEFAULTS is not None else {}
ON_SLURM_GPUS = "slurm_gpu_model" in DEFAULT_RESOURCES
GPU_MODEL = DEFAULT_RESOURCES.get("slurm_gpu_model", "").strip("'\"")
RULE_RESOURCES = rule_resources()


def cluster(rule, **given):
    """The Slurm resources of a measuring rule: its declaration, then ``given`` (values, or functions
    of the job's wildcards), and gpu_model beside a GPU request."""
    if not ON_SLURM_GPUS:
        return {}
    wanted = {**RULE_RESOURCES[rule], **given}
    gpus = wanted.get("gpu", 0)
    if GPU_MODEL and gpus:
        wanted["gpu_model"] = (lambda wildcards: GPU_MODEL if gpus(wildcards) else "") if callable(gpus) else GPU_MODEL
    return wanted


def e2e_attentions(precision):
    """The attentions a target of this precision times: all of e2e.attention in the precisions of
    e2e.attention_precisions (every precision where it is not set), else naive alone, the handout's."""
    compared = E2E.get("attention_precisions", E2E["precisions"])
    return E2E["attention"] if precision in compared else ["naive"]


def e2e_compiles(precision):
    """The compile modes a target of this precision runs: all of e2e.compile in the precisions of
    e2e.compile_precisions (every precision where it is not set), else eager alone."""
    compared = E2E.get("compile_precisions", E2E["precisions"])
    return [c for c in E2E["compile"] if precision in compared or c == "eager"]


# What the grids' ``exclude`` lists leave out of this run, for the report to name.
EXCLUDED = []


def matching(targets, patterns):
    """The targets that match a glob of a grid's list (e.g. results/e2e/*/fp32-*)."""
    return [t for t in targets if any(fnmatch.fnmatch(t, pattern) for pattern in patterns)]


def excluding(targets, patterns):
    """The targets less those matching a glob of a grid's ``exclude``; the ones left out are recorded
    in EXCLUDED."""
    dropped = matching(targets, patterns)
    EXCLUDED.extend(dropped)
    return [t for t in targets if t not in dropped]


def alternatives(values):
    """A wildcard constraint matching exactly these values. None matches nothing ("(?!)"): an empty
    constraint would be no constraint, and a rule constrained to no values would claim every file."""
    return "|".join(re.escape(str(v)) for v in values) or "(?!)"


wildcard_constraints:
    size=alternatives(grid.SIZES),
    precision=alternatives(grid.PRECISIONS),
    compile=alternatives(grid.COMPILE_MODES),
    mode=alternatives(grid.MODES),
    process=r"\d+",


# What a study's rule file defines, for report.smk (lists of targets, figures).
def targets(name):
    """A target list (or dict of target -> GPUs) that a study's rule file defines, by its name."""
    return globals()[name]


def left_out(study):
    """A study whose grid leaves it out: its ``optional`` list is empty, so its first aggregate has no targets."""
    return bool(study.optional) and not targets(next(iter(study.aggregates.values())))


def drawn_figures(study):
    """The figure files of a study: its one-file figures, and each file of those drawn per target."""
    return [
        path
        for name, figure in study.figures.items()
        for path in (targets(figure.files) if figure.files else [f"report/figures/{name}.png"])
    ]
