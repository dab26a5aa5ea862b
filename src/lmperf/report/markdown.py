"""Small helpers shared by the report: numbers and pandas tables as Markdown, and the rows that ran."""

import math

import pandas as pd


def num(x, digits: int = 2) -> str:
    """A float with fixed decimals; NaN as an em dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def ratio(x) -> str:
    """A speed-up cell: "1.23×", or an em dash where one side did not run."""
    shown = num(x)
    return shown if shown == "—" else f"{shown}×"


def text(x) -> str:
    """A string cell that may have been read back from CSV as NaN."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def pct(x, digits: int = 1) -> str:
    return "—" if x is None or math.isnan(x) else f"{100 * x:.{digits}f}%"


def table(frame: pd.DataFrame) -> str:
    """A DataFrame of already-formatted cells as a Markdown table (pandas + tabulate)."""
    return frame.to_markdown(index=False, disable_numparse=True)


def ok(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose measurement ran (status 'ok')."""
    return frame[frame["status"] == "ok"]
