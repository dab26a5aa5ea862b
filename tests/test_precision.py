import math

import pandas as pd
import torch

from lmperf.studies.precision import accumulate, accumulation_rows, autocast_rows, layernorm_rows


def test_accumulation_values():
    assert accumulate(torch.float16, torch.float16, False) == 9.953125  # fp16 sum stalls as it grows
    fp16_of_001 = torch.tensor(0.01, dtype=torch.float16).item()
    mixed = accumulate(torch.float32, torch.float16, False)
    assert math.isclose(mixed, 1000 * fp16_of_001, rel_tol=1e-6)  # the error is fp16's 0.01, not the sum
    assert accumulate(torch.float32, torch.float16, True) == mixed
    rows = pd.DataFrame(accumulation_rows())
    assert rows["abs_error"].idxmax() == 1  # the fp16 accumulator is the worst


def test_autocast_dtypes_are_observed_on_cpu():
    rows = pd.DataFrame(autocast_rows(torch.device("cpu")))
    bf16 = rows[(rows["autocast_dtype"] == "bf16") & (rows["status"] == "ok")].set_index("tensor")["dtype"]
    assert bf16["model parameters"] == "float32"
    assert bf16["fc1 output"] == "bfloat16"
    assert bf16["logits"] == "bfloat16"
    assert bf16["loss"] == "float32"  # cross-entropy runs in float32 under autocast
    assert bf16["gradients"] == "float32"  # gradients match the fp32 parameters
    assert set(rows["status"]) <= {"ok", "skipped"}


def test_fp16_statistics_overflow_and_underflow_but_bf16_does_not():
    rows = pd.DataFrame(layernorm_rows(d=1024)).set_index(["dtype", "scale"])
    assert math.isinf(rows.loc[("fp16", 300.0), "mean_square"])  # 300^2 x 1024 > 65504
    assert rows.loc[("fp16", 1e-4), "mean_square"] == 0.0  # (1e-4)^2 < smallest fp16 subnormal
    assert not rows.loc[("fp16", 1e-4), "output_finite"]
    for scale in (1e-4, 1.0, 300.0):
        assert rows.loc[("bf16", scale), "output_finite"]
        assert rows.loc[("bf16", scale), "mean_square_rel_error"] < 1e-2
        assert rows.loc[("fp32", scale), "mean_square_rel_error"] < rows.loc[("bf16", scale), "mean_square_rel_error"]
