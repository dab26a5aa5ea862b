"""The roofline ladder: our fused AdamW against float64, the rungs' shared optimizer state, the
rungs computing the same thing (the smoke run's loss check), and the section's computed claims."""

import pandas as pd
import pytest
import torch

from lmperf.model import make_optimizer
from lmperf.report import ladder_section
from lmperf.report.render import read
from lmperf.studies.ladder import RUNGS, share_state


def _params(dtype):
    torch.manual_seed(0)
    return [torch.randn(shape, dtype=dtype, requires_grad=True) for shape in ((5000,), (33, 17), (1,))]


def test_fused_adamw_matches_adamw_in_float64():
    """The Triton kernel (interpreter on a CPU) in fp32 against lmperf's AdamW in float64, 5 steps."""
    exact, fused = _params(torch.float64), [p.detach().float().requires_grad_() for p in _params(torch.float64)]
    kwargs = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    reference, ours = make_optimizer("lmperf", exact, **kwargs), make_optimizer("lmperf_fused", fused, **kwargs)
    for step in range(5):
        for p, q in zip(exact, fused):
            p.grad = torch.randn_like(p) * (step + 1)
            q.grad = p.grad.float()
        reference.step()
        ours.step()
    for p, q, start in zip(exact, fused, _params(torch.float64)):
        assert (p - start).abs().median() > 1e-3  # the steps moved the parameters
        assert (q.double() - p).abs().max() < 2e-6  # fp32 rounding of a ~1e-2 update, five times
        m, v = ours.state[q]["m"].double(), ours.state[q]["v"].double()
        assert torch.allclose(m, reference.state[p]["m"], rtol=1e-5, atol=1e-6) and torch.allclose(
            v, reference.state[p]["v"], rtol=1e-5, atol=1e-6
        )
        assert float(ours.state[q]["t"]) == 5


@pytest.mark.parametrize("other", ["lmperf_fused", "torch_fused"])
def test_optimizers_of_the_ladder_share_one_state(other):
    params = _params(torch.float32)
    base, second = make_optimizer("lmperf", params), make_optimizer(other, params)
    share_state(base, second)
    for p in params:
        p.grad = torch.ones_like(p)
    second.step()
    for p in params:  # the second optimizer's step landed in the first one's tensors
        assert float(base.state[p]["t"]) == 1 and bool((base.state[p]["m"] != 0).all())


def test_rungs_compute_the_same_thing(smoke_run):
    """From the same weights and batch, 20 train steps of each rung that runs on a CPU land on the
    same loss as rung bf16's, within bf16's tolerance; the loss moved from where it started."""
    ladder = pd.read_csv(smoke_run / "results/ladder.csv").set_index("rung")
    ran = ladder[ladder["status"] == "ok"]
    assert set(ran.index) == {"baseline", "bf16", "compile", "torch_stack"}
    assert set(ladder.index) == {r.name for r in RUNGS}
    skipped = ladder[ladder["status"] == "skipped"]
    assert skipped["note"].str.contains("CUDA GPU").all()
    loss = ran["loss_after_check"]
    assert (ran["check_steps"] == 20).all() and (loss < ran["initial_loss"] - 0.1).all()
    assert (loss - loss["bf16"]).abs().max() < 2e-2 * loss["bf16"]


def _point(steps: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for order, rung in enumerate(RUNGS):
        if rung.name not in steps:
            rows.append(
                {"rung": rung.name, "order": order, "status": "skipped", "note": "why", "on_ladder": rung.on_ladder}
            )
            continue
        ms = steps[rung.name]
        median = float(pd.Series(ms).median())
        rows.append(
            {
                "rung": rung.name,
                "order": order,
                "adds": rung.adds,
                "optimizer": rung.optimizer,
                "on_ladder": rung.on_ladder,
                "graphed": rung.graphed,
                "status": "ok",
                "note": "",
                "median_ms": median,
                "ci95_low_ms": min(ms),
                "ci95_high_ms": max(ms),
                "step_times_ms": ";".join(map(str, ms)),
                "forward_ms": median / 4,
                "backward_ms": median / 2,
                "optimizer_ms": median / 4,
            }
        )
    frame = pd.DataFrame(rows)
    return frame.assign(size="small", context_length=512, device_name="NVIDIA H100 80GB HBM3", hbm_gbps=float("nan"),
                        matmul_tflops=float("nan"), params=1e8)  # fmt: skip


def test_section_claims_a_win_only_where_its_ci_says_so():
    steady = {"baseline": [100.0, 101, 99, 100, 100.5, 99.5], "bf16": [50.0, 51, 49, 50, 50.5, 49.5]}
    text = ladder_section.render(
        _point({**steady, "cuda_graph": [40.0, 41, 39, 40], "torch_stack": [44.0, 45, 43, 44]})
    )
    assert (
        "Largest single gain: `bf16` over `baseline`, 2.00×" in text
        and "not resolved" not in text.split("Largest")[1].split("\n")[0]
    )
    assert "`cuda_graph` over the torch stack (`torch_stack`, launched): 1.10×" in text
    noisy = ladder_section.render(_point({"baseline": [100.0, 60, 140, 100], "bf16": [90.0, 130, 50, 95]}))
    assert "not resolved" in noisy


def test_section_tables_are_the_csv(smoke_run):
    ladder = read(smoke_run / "results/ladder.csv")
    report = (smoke_run / "report/final.md").read_text()
    assert "## How fast can it train?" in report
    for _, row in ladder[ladder["status"] == "ok"].iterrows():
        assert f"| {row['rung']} " in report and f"{row['median_ms']:.1f} [" in report
