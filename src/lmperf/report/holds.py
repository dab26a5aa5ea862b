"""How a timed block was held before it was timed, in the words the e2e and ladder sections share.

Both time their blocks with ``lmperf.measure.turns.timed_block``: a block is held until its step time
stops moving, or sooner where the power probe (``lmperf.measure.power``) finds the GPU far below its
power limit; since rows carry ``*_turn_retimed``, a block then timed nearer the limit is held again
and timed again."""

import pandas as pd

from lmperf.measure.settings import setting
from lmperf.measure.stats import split_ms
from lmperf.report.markdown import pct, plural


def sooner_clause(rows: pd.DataFrame, present: bool = True) -> str:
    """The clause that follows the windows' rule for rows whose holds could end on the power probe
    (``settle_far_below`` above 0), with how many blocks were timed again where the rows say
    (``*_turn_retimed``); "" for rows held by the windows alone. ``present``: "stays", else "stayed"."""
    far_below = setting(rows, "settle_far_below")
    if not far_below > 0:
        return ""
    stays, is_ = ("stays", "is") if present else ("stayed", "was")
    flags = [
        flag for column in rows if column.endswith("turn_retimed") for cell in rows[column] for flag in split_ms(cell)
    ]
    again = (
        f" (a block then timed nearer the limit {is_} held again and timed again: "
        f"{sum(flag == 1 for flag in flags)} of {plural(len(flags), 'block')} here)"
        if flags
        else ""
    )
    limit = f"below {pct(far_below, 0)} of the limit at the top SM clock"
    return f", or sooner where its instantaneous power {stays} {limit}{again}"
