"""The profiling study's torch.profiler path end to end on the CPU, and the answers computed from it."""

import pandas as pd
import pytest

from lmperf.model import model_config
from lmperf.report import profile_section
from lmperf.studies import profile

STEPS = 2


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile")
    for mode in ("forward", "train_step"):
        profile.main(["--size", "nano", "--context-length", "32", "--mode", mode, "--warmup-steps", "1",
                      "--measured-steps", str(STEPS), "--device", "cpu", "--out", str(out / f"{mode}.csv")])
    kernels = pd.concat([pd.read_csv(out / f"{m}.csv") for m in ("forward", "train_step")])
    timing = pd.concat([pd.read_csv(out / f"{m}-timing.csv") for m in ("forward", "train_step")])
    return kernels, timing


def test_work_is_attributed_to_nested_ranges_of_measured_steps_only(tables):
    kernels, _ = tables
    train = kernels[kernels["mode"] == "train_step"]
    assert {"forward", "backward", "optimizer step"} <= set(train["range"])
    assert {"forward/attention scores", "forward/softmax", "forward/final matmul"} <= set(kernels["range"])
    assert "aten::exp" in set(kernels.loc[kernels["range"] == "forward/softmax", "kernel"])
    # one matmul per linear layer: 7 per block (q, k, v, o, three SwiGLU) and the LM head, per measured step only
    layers = model_config("nano", 32).num_layers
    forward = kernels[(kernels["mode"] == "forward") & (kernels["range"] == "forward") & (kernels["kernel"] == "aten::mm")]
    assert forward["instances"].item() == STEPS * (7 * layers + 1)
    assert (kernels["profiler"] == "torch.profiler").all() and (kernels["category"] != "").all()


def test_answers_from_the_tables(tables):
    kernels, timing = tables
    row = profile_section.answers(kernels, timing).iloc[0]
    assert row["harness_forward_ms"] > 0 and row["profiler_forward_ms"] > 0
    assert 0 < row["gemm_share_forward"] <= 1 and 0 < row["gemm_share_train"] <= 1
    d_head = model_config("nano", 32).d_head
    assert row["softmax_flop_ratio"] == pytest.approx(5 / (4 * d_head))
    assert row["top_forward"] in set(kernels["kernel"])
    text = profile_section.render(kernels, timing)
    assert "## Profiling" in text and "torch.profiler" in text and "(e) softmax takes" in text
