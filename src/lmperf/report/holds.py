"""How a timed block was held before it was timed, in the words the e2e and ladder sections share.

Both time their blocks with ``lmperf.measure.turns.timed_block``: a block is held until its step time
stops moving, or sooner where the power probe (``lmperf.measure.power``) finds the GPU far below its
power limit; a block then timed nearer the limit is held again and timed again."""

import pandas as pd

from lmperf.measure.settings import setting
from lmperf.report.markdown import pct, plural


def sooner_clause(rows: pd.DataFrame, present: bool = True) -> str:
    """ ", or sooner where ..." for rows whose holds could end on the power probe (``settle_far_below``
    above 0); "" for rows held by the steady windows alone. ``present``: "stays" or "stayed"."""
    far_below = setting(rows, "settle_far_below")
    if not far_below > 0:
        return ""
    stays, is_ = ("stays", "is") if present else ("stayed", "was")
    flags = [
        flag for column in rows if column.endswith("turn_retimed") for cell in rows[column] for flag in split(cell)
    ]
    counted = f": {len([f for f in flags if f == '1'])} of {plural(len(flags), 'block')} here" if flags else ""
    return (
        f", or sooner where its instantaneous power {stays} below {pct(far_below, 0)} of the limit at the top SM "
        f"clock (a block then timed nearer the limit {is_} held again and timed again{counted})"
    )


def split(cell) -> list[str]:
    """The ';'-separated values of a turn column's cell; none for an empty cell."""
    return [] if pd.isna(cell) or cell == "" else str(cell).split(";")
