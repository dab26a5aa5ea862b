"""The all-reduce fit and the DDP cost model: a fit that refuses what is not physical, and buckets
formed exactly as DDPBucketed forms them."""

import math

import pandas as pd
import pytest
import torch.nn as nn

from lmperf.distributed import make_buckets
from lmperf.distributed.bucket_model import (
    bucket_bytes,
    contended_backward,
    fit_allreduce,
    fit_contention,
    fit_overhead_bandwidth,
    fitted_cost,
    overlapped_schedule,
    predict_exposed,
    swept_cost,
)

SIZES = [2**10 * 4**k for k in range(11)]  # 1 KiB ... 1 GiB


def sweep(times_s, backend="nccl", world=2) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "backend": backend,
            "world_size": world,
            "bytes": SIZES[: len(times_s)],
            "median_ms": [t * 1e3 for t in times_s],
            "status": "ok",
        }
    )


def test_fit_recovers_overhead_and_bandwidth():
    o, w = 20e-6, 150e9
    fitted_o, fitted_w, r2 = fit_overhead_bandwidth(SIZES, [o + s / w for s in SIZES])
    assert fitted_o == pytest.approx(o, rel=1e-6) and fitted_w == pytest.approx(w, rel=1e-6) and r2 == pytest.approx(1)
    fit = fit_allreduce(sweep([o + s / w for s in SIZES])).iloc[0]
    assert (
        fit["status"] == "ok"
        and fit["overhead_us"] == pytest.approx(20)
        and fit["bandwidth_gbps"] == pytest.approx(150)
    )


def test_fit_refuses_a_negative_overhead():
    # exactly (bytes - 512) / w: a perfect line whose intercept is below zero
    times = [(s - 512) / 1e10 for s in SIZES]
    fit = fit_allreduce(sweep(times)).iloc[0]
    assert fit["status"] == "refused" and "negative per-call overhead" in fit["note"]


def test_fit_refuses_a_poor_r2():
    # scattered around 1 ms whatever the size, then one large size: no single o + bytes / w describes it
    times = [1e-3 * (1 + 0.5 * math.sin(k)) for k in range(10)] + [1e-3 + SIZES[-1] / 1e11]
    fit = fit_allreduce(sweep(times)).iloc[0]
    assert fit["status"] == "refused" and "R²" in fit["note"]
    assert fit["min_r2"] > fit["r2"]  # the row carries the acceptance the report states


def test_fit_covers_the_top_decades_and_leaves_latency_jitter_out():
    # the 2-H200 sweep's shape: o + s/w from 1 MiB up, a flat ~36 µs below with one 71 µs outlier
    o, w = 30e-6, 300e9
    times = [o + s / w for s in SIZES]
    times[2] = 71e-6  # 16 KiB
    fit = fit_allreduce(sweep(times)).iloc[0]
    assert (
        fit["status"] == "ok"
        and fit["overhead_us"] == pytest.approx(30)
        and fit["bandwidth_gbps"] == pytest.approx(300)
    )
    assert fit["min_bytes"] == 2**20 and fit["max_bytes"] == 2**30 and fit["sizes"] == 6


def test_fit_refuses_too_few_sizes():
    assert fit_allreduce(sweep([1e-5, 2e-5])).iloc[0]["status"] == "refused"


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(100, 100)  # 40,000 + 400 bytes
        self.b = nn.Linear(100, 300)  # 120,000 + 1,200 bytes
        self.c = nn.Linear(300, 10, bias=False)  # 12,000 bytes


@pytest.mark.parametrize("bucket_mb", [None, 0.0, 0.05, 0.12, 1.0])
def test_bucket_partition_equals_ddp_bucketeds(bucket_mb):
    params = [p for p in Toy().parameters()]
    expected = [sum(p.numel() * 4 for p in bucket) for bucket in make_buckets(params, bucket_mb)]
    assert bucket_bytes([p.numel() * 4 for p in params], bucket_mb) == expected


def test_predicted_exposed_communication():
    sizes, backward = [400, 400, 400, 400], 8.0
    cost = fitted_cost(1.0, 100.0)  # 1 s overhead, 4 s of transfer per parameter
    assert predict_exposed("naive", sizes, backward, cost) == pytest.approx(4 * 5)
    assert predict_exposed("flat", sizes, backward, cost) == pytest.approx(1 + 16)
    # one bucket per parameter, ready at 2, 4, 6, 8 s; each takes 5 s: ends at 7, 12, 17, 22 -> 14 s after backward
    assert predict_exposed("individual", sizes, backward, cost) == pytest.approx(14)
    # two buckets of 800 bytes (limit 800 B), ready at 4 and 8 s; each takes 9 s: ends at 13, 22
    assert predict_exposed(f"bucketed-{800 / 2**20}", sizes, backward, cost) == pytest.approx(14)
    # one bucket: ready at 8, ends at 8 + 17
    assert predict_exposed("bucketed-1", sizes, backward, cost) == pytest.approx(17)
    # the same two buckets all-reduced in bf16: 400 bytes each on the wire, 5 s each: ends at 9, 14
    assert predict_exposed(f"bucketed-{800 / 2**20}-bf16", sizes, backward, cost) == pytest.approx(6)
    # one bf16 bucket: 800 bytes on the wire, ready at 8, ends at 8 + 9
    assert predict_exposed("bucketed-1-bf16", sizes, backward, cost) == pytest.approx(9)
    with pytest.raises(ValueError, match="no model"):
        predict_exposed("torch_ddp-bf16", sizes, backward, cost)


def test_swept_cost_interpolates_the_medians_and_extends_the_largest_sizes_slope():
    cost = swept_cost([4096, 1024, 16384], [3.0, 2.0, 6.0])  # any order
    assert cost(512) == 2.0  # the latency floor below the smallest size
    assert cost(2560) == pytest.approx(2.5)
    assert cost(16384 + 12288) == pytest.approx(6.0 + 12288 * 3.0 / 12288)  # past the sweep: the last slope
    # the same predictions as a fit where the line runs through the medians
    line = fitted_cost(1.0, 100.0)
    sizes = [400, 800, 1600]
    assert predict_exposed("bucketed-1", sizes, 8.0, swept_cost(sizes, [line(n) for n in sizes])) == pytest.approx(
        predict_exposed("bucketed-1", sizes, 8.0, line)
    )


def test_contention_slows_the_backward_per_byte_in_flight():
    sizes, backward = [400, 400, 400, 400], 8.0
    cost = fitted_cost(1.0, 100.0)  # 5 s per parameter's all-reduce
    assert predict_exposed("individual", sizes, backward, cost, contention=0.0) == pytest.approx(14)
    # 0.01 s per byte: all-reduces start at 2 and 7 inside 8 s -> backward 16 s; ready at 4, 8, 12, 16, they
    # start at 4, 9, 14, 19: three inside -> 20 s; ready at 5, 10, 15, 20, they start there: still three.
    # The last ends at 25, 17 s after the 8 s a backward takes alone.
    assert predict_exposed("individual", sizes, backward, cost, contention=0.01) == pytest.approx(17)
    # after backward, nothing runs beside compute: naive and flat are untouched
    assert predict_exposed("naive", sizes, backward, cost, contention=0.01) == pytest.approx(20)
    # bf16 halves the bytes in flight as well as on the wire: 200 B, 3 s each; at 0.01 s per byte the
    # backward grows 8 -> 12 (two inside) -> 14 (three inside), ready at 3.5, 7, 10.5, 14: ends at 17
    per_parameter_bf16 = f"bucketed-{400 / 2**20}-bf16"
    assert predict_exposed(per_parameter_bf16, sizes, backward, cost) == pytest.approx(6)
    assert predict_exposed(per_parameter_bf16, sizes, backward, cost, contention=0.01) == pytest.approx(9)


def test_contention_is_fitted_from_the_backward_or_refused_with_the_reason():
    sizes, backward = [400, 400, 400, 400], 8.0
    cost = fitted_cost(1.0, 100.0)  # 5 s per parameter's all-reduce
    # a backward 4 s slower than local's 8 s: in a 12 s backward individual's all-reduces are ready at
    # 3, 6, 9, 12 s and start at 3 and 8 inside it: 800 bytes in flight, so 4 / 800 s per byte
    fit = fit_contention(4.0, "individual", sizes, backward, cost)
    assert fit["status"] == "ok" and fit["bytes_in_flight"] == 800
    assert fit["seconds_per_byte"] == pytest.approx(4.0 / 800)
    # the fitted contention, put back into the model, slows that variant's backward by just what was measured
    ready, wire = overlapped_schedule("individual", sizes, backward)
    assert contended_backward(ready, wire, backward, cost, fit["seconds_per_byte"])[0] == pytest.approx(backward + 4.0)

    def why(slowdown, variant="individual", grads=sizes):
        fit = fit_contention(slowdown, variant, grads, backward, cost)
        assert fit["status"] == "refused" and math.isnan(fit["seconds_per_byte"])
        return fit["note"]

    assert why(-0.5) == "individual's backward no slower than local's: no contention to fit"
    assert why(float("nan")) == "no backward time of individual, or of local, to compare"
    # one bucket of everything is ready only when backward ends: nothing runs beside it
    assert why(1.0, variant="bucketed-1000") == "no all-reduce of bucketed-1000 starts inside its backward"
