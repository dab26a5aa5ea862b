"""The report's modules keep numbers apart from words in small functions: none over 60 lines, so
that an analysis function and the sentences made from it can each be read in one screen."""

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "src/lmperf/report"
MOST_LINES = 60


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in ``source`` longer than MOST_LINES."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > MOST_LINES
    ]


def test_no_function_in_the_report_is_over_60_lines():
    found = {path.name: long_functions(path.read_text()) for path in sorted(REPORT.glob("*.py"))}
    assert {name: funcs for name, funcs in found.items() if funcs} == {}


def test_the_check_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_LINES))
    assert long_functions(f"def long():\n{body}\n") == [("long", MOST_LINES + 1)]
    assert long_functions("def short():\n    return 1\n") == []
