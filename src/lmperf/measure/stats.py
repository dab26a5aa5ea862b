"""Summary statistics of per-step times."""

import statistics


def summarize_ms(times_s: list[float]) -> dict[str, float]:
    """mean, std (sample), median, min, max in milliseconds, and the coefficient of variation std/mean."""
    if not times_s:
        raise ValueError("no step times to summarize")
    ms = [t * 1e3 for t in times_s]
    mean = statistics.fmean(ms)
    std = statistics.stdev(ms) if len(ms) > 1 else 0.0
    return {
        "mean_ms": mean,
        "std_ms": std,
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "cv": std / mean if mean > 0 else float("nan"),
    }
