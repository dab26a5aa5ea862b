"""A cost model of bucketed DDP, fitted from the all-reduce sweep.

An all-reduce of b bytes takes o + b / w: a fixed per-call overhead o and an algorithm bandwidth w.
Split s gradient bytes into n_b equal buckets and assume, as the CS336 handout does, that computing
a bucket's gradients takes as long as moving its data (c = s / (n_b w)). Bucket i is ready at i c;
its all-reduce takes o + c > c, so the calls queue and the last one ends at c + n_b (o + c), while
backward ends at n_b c. The time added after backward is therefore

    overhead(n_b) = s / (n_b w) + n_b o,

smallest at n_b = sqrt(s / (w o)), i.e. a bucket size b* = s / n_b = sqrt(s w o), where the
overhead is 2 sqrt(s o / w).
"""

import math

import numpy as np


def fit_overhead_bandwidth(nbytes, seconds) -> tuple[float, float]:
    """Least-squares fit of seconds = o + nbytes / w; returns (o in seconds, w in bytes/second)."""
    slope, intercept = np.polyfit(np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float), 1)
    return float(intercept), float(1.0 / slope)


def ddp_overhead(bucket_bytes: float, total_bytes: float, o: float, w: float) -> float:
    """Seconds added after backward with buckets of bucket_bytes (n_b = s / b, not rounded)."""
    n_buckets = max(1.0, total_bytes / bucket_bytes)
    return total_bytes / (n_buckets * w) + n_buckets * o


def optimal_bucket_bytes(total_bytes: float, o: float, w: float) -> float:
    """b* = sqrt(s w o), capped at s (one bucket)."""
    return min(total_bytes, math.sqrt(total_bytes * w * o))
