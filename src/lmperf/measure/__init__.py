"""The timing harness, FLOP/MFU accounting, environment fingerprint and atomic result rows."""

from lmperf.measure.env import fingerprint
from lmperf.measure.flops import MODES, peak_tflops, step_flops
from lmperf.measure.harness import BenchmarkSpec, resolve_device, run_benchmark, time_once, time_steps
from lmperf.measure.rows import write_csv_atomic, write_rows
from lmperf.measure.stats import summarize_ms

__all__ = [
    "MODES", "BenchmarkSpec", "fingerprint", "peak_tflops", "resolve_device", "run_benchmark",
    "step_flops", "summarize_ms", "time_once", "time_steps", "write_csv_atomic", "write_rows",
]
