"""Small helpers shared by the report: numbers and pandas tables as Markdown, ranges, units and
direction words that follow the data, and the rows that ran."""

import math
import re

import pandas as pd

MISSING = "—"


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and not math.isfinite(x))


def num(x, digits: int = 2) -> str:
    """A float with fixed decimals; NaN or an infinity (a quantity that has no value, such as the
    bandwidth of a line that does not rise) as an em dash."""
    return f"{x:.{digits}f}" if _finite(x) else MISSING


def ratio(x) -> str:
    """A speed-up cell: "1.23×", or an em dash where one side did not run."""
    shown = num(x)
    return shown if shown == MISSING else f"{shown}×"


def text(x) -> str:
    """A string cell that may have been read back from CSV as NaN."""
    return MISSING if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def pct(x, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%" if _finite(x) else MISSING


def share(x) -> str:
    """A setting or target given as a fraction, as a percentage with the digits it has: 0.1 is "10%",
    0.005 is "0.5%" (``pct`` rounds to fixed digits, which would show 0.005 as "0%")."""
    return f"{100 * x:g}%" if _finite(x) else MISSING


def span(low, high, show=num) -> str:
    """A range as "low–high", shown by ``show``; one value where both ends read the same."""
    a, b = show(low), show(high)
    return a if a == b else f"{a}–{b}"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 step", "2 steps" (``nouns`` where the plural is not noun + s)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def time_unit(values_ms) -> tuple[float, str]:
    """One unit for a sentence's times: (factor from ms, unit), µs where every value is below 1 ms,
    s where every value is at least 1000 ms, else ms."""
    finite = [abs(v) for v in values_ms if _finite(v)]
    if finite and max(finite) < 1:
        return 1e3, "µs"
    if finite and min(finite) >= 1e3:
        return 1e-3, "s"
    return 1.0, "ms"


def change(low: float, high: float, rises: str, falls: str, mixed: str, show=pct) -> str:
    """A relative change, or a range of them, in words that follow the sign: ``rises`` or ``falls``
    and the size of the change ("slows the step by 15.8%", "speeds the step up by 3.1%–4.0%"), or
    ``mixed`` and the signed range where it holds both signs ("changes the step time by -2.0% to +4.0%")."""
    if low >= 0:
        return f"{rises} {span(low, high, show)}"
    if high <= 0:
        return f"{falls} {span(-high, -low, show)}"
    return f"{mixed} {show(low)} to +{show(high)}"


def anchor(heading: str) -> str:
    """The link to a heading as GitHub renders Markdown: lower case, punctuation dropped, spaces as hyphens."""
    return "#" + re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def escape(cell) -> str:
    """A table cell (or header) with its pipes escaped: GFM splits a row at every unescaped "|"."""
    return str(cell).replace("|", "\\|")


def table(frame: pd.DataFrame) -> str:
    """A DataFrame of already-formatted cells as a Markdown table (pandas + tabulate), its pipes
    escaped so that every row has the header's cells."""
    shown = frame.rename(columns=escape).map(escape) if len(frame.columns) else frame
    return shown.to_markdown(index=False, disable_numparse=True)


def drop_empty(frame: pd.DataFrame, keep=()) -> pd.DataFrame:
    """The table's columns less those with no value in any row (every cell an em dash or blank), but
    for ``keep``: a column of a quantity this run could not measure says nothing row by row."""
    empty = [c for c in frame.columns if c not in keep and frame[c].astype(str).isin([MISSING, ""]).all()]
    return frame.drop(columns=empty)


def ok(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose measurement ran (status 'ok')."""
    return frame[frame["status"] == "ok"]
