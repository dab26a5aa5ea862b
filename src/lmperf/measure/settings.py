"""The settings and targets a result row carries, so that the report states the thresholds it read.

A claim such as "host-bound" or "within the CI target" depends on a setting of the run: the adaptive
timer's target CI half-width (``ci_halfwidth``), the host-bound threshold (``host_bound_threshold``),
the untimed hold before timing (``settle_seconds``), or a target the study checks against (e.g.
``e2e_agreement``, ``loss_tolerance``, the DDP study's ``bucket_model_factor`` and
``sharding_saved_share``), or a rule the report applies to them and states (the fit's ``min_r2``, the
flash sweep's ``flat_within`` and ``launched_within``, the ladder's ``power_limit_share``, memory's
``largest_share`` of allocations listed). The study writes each onto its rows, and the report reads
them back with ``setting``.

Rows written before a column existed were all made with one value of it: ``MADE_WITH`` records
that value (the config and code defaults of their time), so that older result files render as
they did. It describes those files, not the present defaults: a run today writes its own value.
"""

import pandas as pd

MADE_WITH = {
    "ci_halfwidth": 0.01,
    "host_bound_threshold": 0.10,
    "e2e_agreement": 0.05,
    "loss_tolerance": 0.02,
    "physics_slack": 0.02,
    "min_r2": 0.95,
    "flat_within": 2.0,
    "power_limit_share": 0.97,
    "largest_share": 0.10,
    "bucket_model_factor": 2.0,
    "sharding_saved_share": 0.9,
    "settle_far_below": 0.0,  # holds ended only on steady windows
}


def setting(rows: pd.DataFrame, column: str) -> float:
    """The one value of ``column`` on ``rows``; ``MADE_WITH``'s where the rows predate the column.

    Rows that carry several values (runs with different settings) have no one threshold to state:
    that is an error, not a value to pick silently."""
    values = rows[column].dropna().unique() if column in rows else []
    if len(values) == 0:
        return MADE_WITH[column]
    if len(values) > 1:
        raise ValueError(f"rows carry several values of {column}: {sorted(values)}; render them apart")
    return float(values[0])
