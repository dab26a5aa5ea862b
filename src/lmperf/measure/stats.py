"""Summary statistics of per-step times: the median with a bootstrap confidence interval.

The median is the headline because step times are skewed by the occasional slow step (a host
hiccup, a clock change); its 95% CI comes from the percentile bootstrap, which assumes no shape of
the distribution. Mean, std and CV stay beside it, as the handout asks for them.
"""

import statistics

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


def _bootstrap(
    statistic, samples: list[np.ndarray], confidence: float, resamples: int, seed: int, paired: bool = True
) -> tuple[float, float]:
    """Percentile CI of ``statistic(*resampled)``: paired samples (round i of an interleaved run
    stays together; they must be of equal length) are resampled by the same indices, others
    independently."""
    rng = np.random.default_rng(seed)
    paired = paired and len({len(s) for s in samples}) == 1
    if paired:
        idx = rng.integers(0, len(samples[0]), size=(resamples, len(samples[0])))
        draws = [s[idx] for s in samples]
    else:
        draws = [s[rng.integers(0, len(s), size=(resamples, len(s)))] for s in samples]
    values = statistic(*draws)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def median_ci(
    samples, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap confidence interval of the median of ``samples``."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    return _bootstrap(lambda d: np.median(d, axis=1), [x], confidence, resamples, seed)


def ratio_ci(
    a, b, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0, paired: bool = True
) -> tuple[float, float, float]:
    """median(a) / median(b) and its bootstrap CI.

    Paired samples of equal length are taken as interleaved rounds (A B A B ...) and resampled in
    pairs, so a slow stretch of the run that hit both sides cancels in the ratio; ``paired=False``
    for samples from separate runs.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("no samples")
    low, high = _bootstrap(
        lambda x, y: np.median(x, axis=1) / np.median(y, axis=1), [a, b], confidence, resamples, seed, paired
    )
    return float(np.median(a) / np.median(b)), low, high


def difference_ci(
    a, b, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0, paired: bool = False
) -> tuple[float, float, float]:
    """median(a) - median(b) and its bootstrap CI (independent samples unless ``paired``)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("no samples")
    low, high = _bootstrap(
        lambda x, y: np.median(x, axis=1) - np.median(y, axis=1), [a, b], confidence, resamples, seed, paired
    )
    return float(np.median(a) - np.median(b)), low, high


def resolved(low: float, high: float, null: float = 1.0) -> bool:
    """Does the CI [low, high] exclude ``null`` (for a ratio: no difference)?"""
    return not (low <= null <= high)


def converged(samples, rel_halfwidth: float) -> bool:
    """Is the median's CI half-width at most ``rel_halfwidth`` of the median?"""
    if len(samples) < 2:
        return False
    low, high = median_ci(samples, resamples=500)
    return (high - low) / 2 <= rel_halfwidth * statistics.median(samples)


def join_ms(times_s: list[float]) -> str:
    """Per-step times in seconds as the result column's text: ms, ';'-separated, so a report can
    bootstrap any statistic of them later (``split_ms`` reads it back)."""
    return ";".join(f"{t * 1e3:.4f}" for t in times_s)


def split_ms(cell) -> list[float]:
    """A ``join_ms`` cell (or any ';'-separated cell of numbers) read back from CSV as a list; [] for a
    missing cell. A column whose every cell holds one value is read by pandas as numbers: such a cell
    is a list of one."""
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return [float(cell)] if cell == cell else []
    return [float(t) for t in cell.split(";")] if isinstance(cell, str) and cell else []


def summarize_ms(times_s: list[float], prefix: str = "") -> dict[str, float]:
    """Median with its 95% CI, mean, std (sample), min, max in ms, the CV std/mean and the count;
    column names carry ``prefix`` (e.g. "graphed_")."""
    if not times_s:
        raise ValueError("no step times to summarize")
    ms = [t * 1e3 for t in times_s]
    mean = statistics.fmean(ms)
    std = statistics.stdev(ms) if len(ms) > 1 else 0.0
    low, high = median_ci(ms)
    stats = {
        "median_ms": statistics.median(ms),
        "ci95_low_ms": low,
        "ci95_high_ms": high,
        "mean_ms": mean,
        "std_ms": std,
        "min_ms": min(ms),
        "max_ms": max(ms),
        "cv": std / mean if mean > 0 else float("nan"),
        "n_steps": len(ms),
    }
    return {f"{prefix}{k}": v for k, v in stats.items()}
