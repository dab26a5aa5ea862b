"""The README and docs/ as a newcomer reads them: the two commands up front, links that resolve,
and text about lmperf rather than about how it is built."""

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACKED = subprocess.run(["git", "ls-files", "*README.md"], cwd=ROOT, capture_output=True, text=True).stdout
READMES = [ROOT / name for name in TRACKED.split()]
ISSUE_NUMBER = re.compile(r"(?<![\w/&])#\d+\b")


def test_the_readme_opens_with_the_two_commands():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "make report" in first and "make test" in first


DOCS = (
    sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "report/reference").glob("*.yaml")) + [ROOT / "config.yaml"]
)


@pytest.mark.parametrize("path", READMES + DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_readme_cites_an_issue_number(path):
    cited = [line for line in path.read_text().splitlines() if ISSUE_NUMBER.search(line)]
    assert not cited, f"{path.relative_to(ROOT)} cites issue numbers: {cited[:3]}"


def prose(source: str) -> list[str]:
    """The docstrings and comments of Python source: what a reader of the code reads as text."""
    tree = ast.parse(source)
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    docstrings = [doc for doc in map(ast.get_docstring, nodes) if doc]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return docstrings + [t.string for t in tokens if t.type == tokenize.COMMENT]


MAKING = re.compile(r"lent (?:machine|GPU)|device budget", re.I)  # how the project was built, not what it does


@pytest.mark.parametrize("path", sorted((ROOT / "src").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_no_docstring_or_comment_cites_an_issue_number(path):
    cited = [text for text in prose(path.read_text()) if ISSUE_NUMBER.search(text) or MAKING.search(text)]
    assert not cited, f"{path.relative_to(ROOT)} cites issue numbers or how it was made: {cited[:3]}"


def test_the_check_finds_an_issue_number_in_a_docstring_and_a_comment():
    source = '''def f():\n    """Fixed in #12."""\n    return 1  # see #7\n'''
    assert [text for text in prose(source) if ISSUE_NUMBER.search(text)] == ["Fixed in #12.", "# see #7"]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "workflow").rglob("*.smk")) + [ROOT / "Snakefile"], ids=lambda p: p.name
)
def test_no_rule_file_cites_an_issue_number(path):
    cited = [line for line in path.read_text().splitlines() if ISSUE_NUMBER.search(line) or MAKING.search(line)]
    assert not cited, f"{path.relative_to(ROOT)} cites issue numbers or how it was made: {cited[:3]}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    missing = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert not missing, f"{path.name} links to missing files: {missing}"


def test_the_readme_names_nothing_outside_the_repository():
    assert "../" not in (ROOT / "README.md").read_text()
