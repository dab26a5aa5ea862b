"""The README and docs/ as a newcomer reads them: the two commands up front, links that resolve,
and text about lmperf rather than about how it is built."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACKED = subprocess.run(["git", "ls-files", "*README.md"], cwd=ROOT, capture_output=True, text=True).stdout
READMES = [ROOT / name for name in TRACKED.split()]
ISSUE_NUMBER = re.compile(r"(?<![\w/&])#\d+\b")


def test_the_readme_opens_with_the_two_commands():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "make report" in first and "make test" in first


@pytest.mark.parametrize("path", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_readme_cites_an_issue_number(path):
    cited = [line for line in path.read_text().splitlines() if ISSUE_NUMBER.search(line)]
    assert not cited, f"{path.relative_to(ROOT)} cites issue numbers: {cited[:3]}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    missing = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert not missing, f"{path.name} links to missing files: {missing}"


def test_the_readme_names_nothing_outside_the_repository():
    assert "../" not in (ROOT / "README.md").read_text()
