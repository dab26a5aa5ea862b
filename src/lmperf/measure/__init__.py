"""Timing (launched and graphed, adaptive, interleaved), statistics, the environment fingerprint and
atomic result rows. FLOP accounting (lmperf.measure.flops) is imported on its own: it needs the model."""

from lmperf.measure.env import fingerprint
from lmperf.measure.rows import write_csv_atomic, write_rows
from lmperf.measure.stats import difference_ci, median_ci, ratio_ci, resolved, summarize_ms
from lmperf.measure.timing import (
    Budget,
    GraphUnavailable,
    PhaseClock,
    capture_graph,
    free_memory,
    host_bound,
    measure,
    release_cached,
    resolve_device,
    synchronize,
    time_once,
)

__all__ = [
    "Budget",
    "GraphUnavailable",
    "PhaseClock",
    "capture_graph",
    "difference_ci",
    "fingerprint",
    "free_memory",
    "release_cached",
    "host_bound",
    "measure",
    "median_ci",
    "ratio_ci",
    "resolve_device",
    "resolved",
    "summarize_ms",
    "synchronize",
    "time_once",
    "write_csv_atomic",
    "write_rows",
]
