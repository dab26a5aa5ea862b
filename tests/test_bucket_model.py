import math

import pytest

from lmperf.distributed.bucket_model import ddp_overhead, fit_overhead_bandwidth, optimal_bucket_bytes


def test_fit_recovers_overhead_and_bandwidth():
    o, w = 50e-6, 100e9
    sizes = [2**20, 10 * 2**20, 100 * 2**20, 2**30]
    fitted_o, fitted_w = fit_overhead_bandwidth(sizes, [o + s / w for s in sizes])
    assert fitted_o == pytest.approx(o, rel=1e-6)
    assert fitted_w == pytest.approx(w, rel=1e-9)


def test_overhead_formula_and_its_minimum():
    s, o, w = 8e9, 30e-6, 150e9
    # hand-computed: 4 buckets -> s/(4w) + 4o
    assert ddp_overhead(s / 4, s, o, w) == pytest.approx(s / (4 * w) + 4 * o)
    best = optimal_bucket_bytes(s, o, w)
    assert best == pytest.approx(math.sqrt(s * w * o))
    assert ddp_overhead(best, s, o, w) == pytest.approx(2 * math.sqrt(s * o / w))
    for factor in (0.5, 2.0):  # any other bucket size costs more
        assert ddp_overhead(best * factor, s, o, w) > ddp_overhead(best, s, o, w)
    assert optimal_bucket_bytes(1e3, 1.0, 1e9) == 1e3  # never more than one bucket's worth
