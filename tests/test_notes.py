"""notes/ stays usable as src/ changes: its index names every script and output, a pinned script names
a commit that holds it, and every other script still imports (its work waits behind
`if __name__ == "__main__":`), so a renamed or removed lmperf name breaks here, not in a reader's hands."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "notes"
INDEX = NOTES / "README.md"
SCRIPTS = sorted(NOTES.rglob("*.py"))
SOURCES = [*SCRIPTS, *sorted(NOTES.rglob("*.cu")), *sorted(NOTES.rglob("*.hpp"))]
NOT_OUTPUTS = {".py", ".cu", ".hpp", ".md", ".pyc", ".so"}  # sources, essays, and what Python or nvcc builds
OUTPUTS = sorted(p for p in NOTES.rglob("*") if p.is_file() and p.suffix not in NOT_OUTPUTS)
PINNED = re.compile(r"^# pinned: ([0-9a-f]{12})  \(", re.MULTILINE)
RAN_AT = re.compile(r"^Ran at: (.*)$", re.MULTILINE)
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
# Packages a CPU machine may lack: where a script needs one, its import is skipped, not failed.
GPU_ONLY = ("triton", "cutlass", "pynvml", "cuda")


def name(path: Path) -> str:
    return path.relative_to(NOTES).as_posix()


def pin(path: Path) -> str | None:
    found = PINNED.search(path.read_text())
    return found and found[1]


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def named(text: str, path: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/.-])", text) is not None


@pytest.fixture(scope="module")
def history():
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("a shallow clone lacks the commits the notes name")


def test_the_index_names_every_script_and_output():
    index = INDEX.read_text()
    missing = [name(p) for p in [*SOURCES, *OUTPUTS] if not named(index, name(p))]
    assert not missing, f"notes/README.md does not name: {missing}"


def test_every_file_the_index_names_is_there():
    """A path in backticks that ends in a file's suffix is a file under notes/ or the repository's root."""
    paths = re.findall(r"`([\w./-]+\.(?:py|cu|hpp|md|txt|csv))`", INDEX.read_text())
    missing = [p for p in paths if not (NOTES / p).exists() and not (ROOT / p).exists()]
    assert not missing, f"notes/README.md names missing files: {missing}"


@pytest.mark.parametrize("path", SCRIPTS, ids=name)
def test_every_script_says_where_it_ran(path):
    assert RAN_AT.search(path.read_text()), f"{name(path)} has no 'Ran at:' line"


@pytest.mark.parametrize("path", SCRIPTS, ids=name)
def test_the_commits_a_script_names_exist(path, history):
    """Every commit in a script's `Ran at:` lines is in the history, and a pinned script's commit holds
    the script: `git checkout <commit>` gives a tree where it runs."""
    commits = {c for line in RAN_AT.findall(path.read_text()) for c in COMMIT.findall(line)}
    if pin(path):
        held = git("cat-file", "-e", f"{pin(path)}:{path.relative_to(ROOT).as_posix()}")
        assert held.returncode == 0, f"{name(path)} is pinned to {pin(path)}, which does not hold it"
    queries = "".join(f"{c}^{{commit}}\n" for c in sorted(commits))
    answers = subprocess.run(
        ["git", "cat-file", "--batch-check"], cwd=ROOT, input=queries, capture_output=True, text=True
    )
    unknown = [line for line in answers.stdout.splitlines() if line.endswith(("missing", "ambiguous"))]
    assert not unknown, f"{name(path)} names commits the history lacks: {unknown}"


@pytest.mark.parametrize("path", [p for p in SCRIPTS if not pin(p)], ids=name)
def test_an_unpinned_script_imports(path, monkeypatch):
    """Import the script as `python notes/<...>.py` would see it (its folder first on the path, the
    repository root as the working directory) without running its main."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [str(path.parent), *sys.path])
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location(f"notes_{name(path).replace('/', '_')[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    try:  # on a CPU machine, any work on the GPU at import time fails here
        spec.loader.exec_module(module)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in GPU_ONLY:
            pytest.skip(f"needs {error.name}, absent on this machine")
        raise
    finally:  # the siblings it imported (common, held_energy, ...) are fresh for the next script
        for key in set(sys.modules) - before:
            if str(NOTES) in str(getattr(sys.modules[key], "__file__", "") or ""):
                del sys.modules[key]
