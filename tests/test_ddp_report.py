"""The data-parallel report sections and the XXL accounting, on hand-made rows and hand-computed numbers."""

import math

import pandas as pd
import pytest

from lmperf.distributed.accounting import (
    GB, FFNStack, Mesh, compute_bound_batch, fsdp_bytes_per_device, smallest_fsdp,
)
from lmperf.distributed.bucket_model import optimal_bucket_bytes
from lmperf.report import ddp_section


def test_xxl_accounting_matches_hand_computation():
    model = FFNStack()
    assert model.params == 2 * 16384 * 53248 * 126 == 219_848_638_464
    assert sum(model.state_bytes().values()) == 16 * model.params  # fp32 weights, grads, two AdamW moments
    assert model.activation_bytes_per_token() == 2 * (16384 + 53248) * 126
    n = smallest_fsdp(model, 95 * GB, tokens=0)
    assert n == math.ceil(16 * model.params / 95e9) == 38
    assert fsdp_bytes_per_device(model, n, 0) <= 95 * GB < fsdp_bytes_per_device(model, n - 1, 0)
    bound = compute_bound_batch(model, Mesh())
    assert bound["batch_tokens"] == pytest.approx(16 * (4.6e14 / 1.8e11) / 2)  # X * alpha / M_X
    assert bound["per_device_tokens"] == pytest.approx(bound["batch_tokens"] / 64)
    assert bound["tp_bound_ok"]


def _train_rows(steps: dict, syncs: dict) -> pd.DataFrame:
    return pd.DataFrame([{
        "variant": v, "step_ms": ms, "step_std_ms": 0.5, "sync_ms": syncs.get(v), "global_batch": 16, "size": "xl",
        "context_length": 128, "world_size": 2, "backend": "nccl", "device_name": "GPU", "warmup": 5, "steps": 20,
        "params": 10, "grad_mib": 8192.0, "status": "ok", "note": ""} for v, ms in steps.items()])


def test_exposed_communication_and_hidden_share():
    rows = ddp_section.exposed(_train_rows(
        {"local": 100.0, "naive": 150.0, "individual": 110.0, "bucketed-100": 104.0, "torch_ddp": 103.0},
        {"naive": 50.0, "individual": 4.0, "bucketed-100": 2.0})).set_index("variant")
    assert rows.loc["naive", "exposed_ms"] == 50.0
    assert rows.loc["individual", "hidden"] == pytest.approx(0.8)
    assert rows.loc["bucketed-100", "comm_share"] == pytest.approx(4 / 104)
    text = ddp_section.render_training(_train_rows(
        {"local": 100.0, "naive": 150.0, "individual": 110.0, "bucketed-100": 104.0, "torch_ddp": 103.0},
        {"naive": 50.0, "individual": 4.0, "bucketed-100": 2.0}))
    joined = "\n".join(text)
    assert "**bucketed-100** at 104.00 ms, 1.0% against torch DDP" in joined and "within 3%: **met**" in joined
    assert "hide 80.0% (individual) to 92.0% (bucketed-100)" in joined and "≥ 80% each: **met**" in joined


def test_bucket_model_optimum_sits_beside_the_measured_one():
    o, w = 100e-6, 3e11  # an all-reduce sweep that follows time = o + bytes / w exactly
    sizes = [2**20, 10 * 2**20, 100 * 2**20, 2**30]
    allreduce = pd.DataFrame({"backend": "nccl", "world_size": 2, "bytes": sizes, "size_mb": [1, 10, 100, 1024],
                              "mean_ms": [(o + b / w) * 1e3 for b in sizes], "status": "ok", "note": ""})
    train = _train_rows({"local": 100.0, "naive": 150.0, "bucketed-100": 104.0, "torch_ddp": 103.0}, {"naive": 50.0})
    expected = optimal_bucket_bytes(8192 * 2**20, o, w) / 2**20
    joined = "\n".join(ddp_section.render_training(train, allreduce))
    assert f"puts the optimum at {expected:.0f} MB; the fastest measured bucket size is 100 MB" in joined


def test_sharding_section_compares_saved_memory_with_the_state_removed():
    common = {"size": "xl", "world_size": 2, "param_mib": 100.0, "grad_mib": 100.0, "peak_after_build_mib": 100.0,
              "allocated_before_step_mib": 0.0, "peak_during_step_mib": 0.0, "status": "ok", "note": ""}
    rows = pd.DataFrame([
        {**common, "sharded": False, "optimizer_state_mib": 200.0, "allocated_after_step_mib": 410.0, "step_ms": 10.0},
        {**common, "sharded": True, "optimizer_state_mib": 100.0, "allocated_after_step_mib": 320.0, "step_ms": 11.0},
    ])
    joined = "\n".join(ddp_section.render_sharding(rows))
    assert "should remove 100 MiB" in joined and "90 MiB lower, **90.0%**" in joined and "**met**" in joined
    assert "broadcasts after each step cost more" in joined
    skipped = pd.DataFrame([{"study": "ddp_sharding", "status": "skipped", "note": "needs CUDA"}])
    assert "Not measured: needs CUDA" in "\n".join(ddp_section.render_sharding(skipped))
