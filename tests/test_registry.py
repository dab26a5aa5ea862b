"""The studies' declarations (lmperf.registry) are the contract the report reads: a section reads only
the columns its study declares, the declared types hold in real rows, and the report imports no study."""

import ast
from pathlib import Path

import pandas as pd
import pytest

from lmperf import registry
from lmperf.report import comm_section, e2e_section, flash_section, ladder_section, render

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "tests/data/smoke-cpu"
REFERENCE = ROOT / "report/reference/h100"


def declared_only(frame: pd.DataFrame, result: str) -> pd.DataFrame:
    """The rows with the columns their study declares, and no other."""
    return frame[[c for c in frame.columns if c in registry.declared(result)]]


def render_declared(monkeypatch, results: Path) -> str:
    """The whole report rendered from the declared columns of each result file alone."""
    read = render.read

    def read_declared(path: Path) -> pd.DataFrame:
        return declared_only(read(path), str(path.relative_to(results)).removesuffix(".csv"))

    monkeypatch.setattr(render, "read", read_declared)
    return render.render(results, "smoke")


def test_the_report_reads_only_declared_columns(monkeypatch):
    """A section that reads a column its study does not declare changes (or breaks) the report
    rendered from the declared columns alone."""
    full = render.render(SMOKE, "smoke")
    assert render_declared(monkeypatch, SMOKE) == full


@pytest.mark.parametrize(
    "slice_, results, draw",
    [
        ("ladder", ("ladder", "ladder_kernels"), ladder_section.render),
        ("flash-gluon", ("flash/leaderboard", "flash_sweep"), flash_section.render),
        ("allreduce-x4", ("allreduce", "comm_fit"), comm_section.render),
    ],
)
def test_gpu_sections_read_only_declared_columns(slice_, results, draw):
    """The same of GPU rows (committed reference runs), whose columns a CPU run leaves empty."""
    frames = [render.read(REFERENCE / slice_ / f"{Path(name).name}.csv") for name in results]
    assert draw(*(declared_only(f, name) for f, name in zip(frames, results))) == draw(*frames)


def test_the_flash_sweep_in_rounds_reads_only_declared_columns():
    """The launched target, which reads the rounds and ``launched_within``, reads them as declared."""
    folder = ROOT / "report/reference/flash-sweep-rounds"
    sweep = pd.concat([render.read(folder / f"rows/flash/sweep/bf16-d{d}.csv") for d in (64, 128)])
    leaderboard = render.read(REFERENCE / "flash-gluon/leaderboard.csv")
    rendered = flash_section.render(leaderboard, sweep)
    assert "ours against the faster SDPA backend" in rendered
    assert flash_section.render(leaderboard, declared_only(sweep, "flash_sweep")) == rendered


ONE_ALLOCATION = ROOT / "report/reference/one-allocation"


def test_sections_of_rows_timed_in_turns_read_only_declared_columns():
    """Sections rendered from rows whose replays took turns (clock, power and each turn's median) read
    only declared columns: e2e's section, and the ladder's beside e2e at 2.7B, where it shows both
    studies' clocks."""
    run = ONE_ALLOCATION / "e2e-ladder/run1"
    e2e, ladder = render.read(run / "e2e.csv"), render.read(run / "ladder.csv")
    assert "graphed_turns" in e2e and "replay_turn_ms" in ladder
    declared = declared_only(ladder, "ladder"), declared_only(e2e, "e2e")
    assert ladder_section.render(declared[0], None, declared[1]) == ladder_section.render(ladder, None, e2e)
    small = render.read(ONE_ALLOCATION / "head-d3fc0d3/rows/e2e/small/bf16-eager.csv")
    warmup = render.read(SMOKE / "warmup.csv")
    assert e2e_section.render(declared_only(small, "e2e"), warmup) == e2e_section.render(small, warmup)


def test_a_section_reading_an_undeclared_column_fails(monkeypatch):
    """The check above catches it: e2e's section reads median_ms; undeclared, the report breaks."""
    columns = {name: kind for name, kind in registry.COLUMNS["e2e"].items() if name != "median_ms"}
    e2e = registry.STUDIES["e2e"]
    monkeypatch.setitem(
        registry.STUDIES, "e2e", registry.Study(**{**e2e.__dict__, "columns": {"e2e": columns | registry.SETTINGS}})
    )
    with pytest.raises(KeyError, match="median_ms"):
        render_declared(monkeypatch, SMOKE)


def conforms(values: pd.Series, kind: type) -> bool:
    """Every value present is one of the declared type (an integer column may be read as floats
    where a failed row left it empty; a CSV holds booleans as True/False)."""
    present = values.dropna()
    if kind is float:
        return pd.api.types.is_numeric_dtype(present) or present.empty
    if kind is int:
        return pd.api.types.is_numeric_dtype(present) and bool((present == present.round()).all())
    if kind is bool:
        return set(present.astype(str)) <= {"True", "False"}
    return True  # any value reads as text


@pytest.mark.parametrize("path", sorted(p for p in SMOKE.rglob("*.csv*")), ids=lambda p: str(p.relative_to(SMOKE)))
def test_rows_hold_the_declared_types(path):
    result = str(path.relative_to(SMOKE)).removesuffix(".gz").removesuffix(".csv")
    frame = render.read(SMOKE / f"{result}.csv")
    columns = registry.declared(result)
    wrong = [c for c in frame.columns if c in columns and not conforms(frame[c], columns[c])]
    assert not wrong, wrong


def test_every_section_reads_results_that_a_study_declares():
    """A section's results are files some study's declaration types: no section reads an unknown file."""
    for study in registry.sections():
        for result in study.reads:
            assert registry.declared(result)


def test_the_report_imports_no_study():
    """lmperf.report reads rows; the studies write them: no module under report/ imports lmperf.studies."""
    for path in (ROOT / "src/lmperf/report").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.startswith("lmperf.studies") for n in names), path.name


def test_each_section_is_headed_by_its_declared_title():
    """The registry's title is the heading a section writes, and the one a study left out of the grid
    gets: one name for a study, not two."""
    frames = {name: render.read(SMOKE / f"{name}.csv") for study in registry.sections() for name in study.reads}
    for study in registry.sections():
        assert render.section(study, frames).startswith(f"## {study.title}\n"), study.name
