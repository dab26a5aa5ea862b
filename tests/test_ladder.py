"""The roofline ladder: our fused AdamW against float64, the rungs' shared optimizer state, the
rungs computing the same thing (the smoke run's loss check), and the section's computed claims."""

import argparse
import time

import pandas as pd
import pytest
import torch

from conftest import markdown_tables
from lmperf.kernels.fused_rmsnorm import add_rmsnorm, rmsnorm
from lmperf.model import make_optimizer
from lmperf.report import ladder_section
from lmperf.report.render import read
from lmperf.studies.ladder import RUNGS, Ladder, LadderRun, Rung, share_state


def _params(dtype):
    """Sizes that the fused AdamW updates one launch each (not multiples of 16) and in one table
    (multiples of 16, of one to three programs)."""
    torch.manual_seed(0)
    shapes = ((5000,), (33, 17), (16,), (1,), (64, 48), (4096 + 16,), (32,))
    return [torch.randn(shape, dtype=dtype, requires_grad=True) for shape in shapes]


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


def test_fused_adamw_keeps_fp32_masters_of_bf16_parameters():
    """A bf16 parameter: the kernel's fp32 master against lmperf's AdamW in float64 on the same bf16
    gradients, 5 steps; the parameter is within one bf16 step of the master after every step
    (tests/test_gpu.py asserts the exact rounding a GPU does)."""
    start = [p.detach().bfloat16() for p in _params(torch.float64)]
    exact = [p.double().requires_grad_() for p in start]
    model = [p.clone().requires_grad_() for p in start]
    kwargs = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    reference, ours = make_optimizer("lmperf", exact, **kwargs), make_optimizer("lmperf_fused", model, **kwargs)
    for step in range(5):
        for p, q in zip(exact, model):
            q.grad = (torch.randn_like(p) * (step + 1)).bfloat16()
            p.grad = q.grad.double()
        reference.step()
        ours.step()
        for q in model:  # the master's bf16 rounding: to nearest on a GPU, toward zero in the interpreter
            master = ours.state[q]["master"]
            assert ((q.double() - master.double()).abs() <= master.double().abs() * 2**-7).all()
    for p, q in zip(exact, model):
        master = ours.state[q]["master"]
        assert master.dtype == ours.state[q]["m"].dtype == torch.float32
        assert (master.double() - p.detach()).abs().max() < 2e-6  # fp32 rounding, as for an fp32 parameter
        assert (q.double() - p.detach()).abs().max() > 0  # the bf16 copy alone would have lost that precision


def test_fused_adamw_updates_a_list_as_it_updates_each_parameter_alone():
    """One launch over the listed parameters (bf16 with masters, and fp32) gives bit for bit the update
    of one launch per parameter. The step's chunks (20,000 bytes here: two of them hold listed
    parameters) keep one table each: replaced when the gradients move, reused while they stay."""
    start = _params(torch.float32)
    kwargs = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for dtype in (torch.float32, torch.bfloat16):
        listed, alone = ([p.detach().to(dtype).requires_grad_() for p in start] for _ in range(2))
        together, each = (
            make_optimizer("lmperf_fused", listed, **kwargs),
            make_optimizer("lmperf_fused", alone, **kwargs),
        )
        together.CHUNK_BYTES = 20_000
        for step in range(4):
            for p, q in zip(listed, alone):
                grad = (torch.randn_like(p, dtype=torch.float32) * (step + 1)).to(dtype)
                if step < 3:
                    p.grad = grad  # a new gradient tensor: the tables are made again
                else:
                    tables = dict(together._recent)
                    p.grad.copy_(grad)  # the same addresses: the tables stay
                q.grad = p.grad.clone()
            together.step()
            for q in alone:
                each.update([q], each.param_groups[0])
        for p, q in zip(listed, alone):
            assert torch.equal(p, q) and torch.equal(together.state[p]["m"], each.state[q]["m"])
        assert len(tables) == 2 and all(together._recent[chunk] is table for chunk, table in tables.items())
        assert not together._captured and not each._recent


def test_fused_adamw_list_kernel_loads_as_wide_as_one_parameters():
    """Compiled for an H100 without a GPU: the list kernel, whose addresses it reads from its table,
    makes as many 16-byte loads and stores as the one-parameter kernel does with aligned arguments."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).with_name("compile_adamw_sm90.py")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.split("\n") if line)
    assert set(lines) == {"fp32", "bf16"}
    for line in lines.values():
        one, listed = (part.split("=")[1] for part in line.split())
        assert one == listed and int(one.split(",")[0]) > 0, line


@pytest.mark.parametrize("residual", [False, True])
def test_fused_rmsnorm_matches_float64(residual):
    """The norm kernels (interpreter on a CPU) against the model's RMSNorm in float64, forward and
    backward: 21 rows (bands of 6 and a last one of 3, each ending in a part of a 4-row tile) of 40
    columns (a masked 64-wide block), a bf16
    residual whose gradient comes back in bf16, and gradients of both outputs (stream and norm)."""
    torch.manual_seed(0)
    x, w, dh, dn = torch.randn(3, 7, 40), torch.randn(40), torch.randn(3, 7, 40), torch.randn(3, 7, 40)
    r = torch.randn(3, 7, 40).bfloat16() if residual else None
    exact = [t.double().requires_grad_() if t is not None else None for t in (x, r, w)]
    ours = [t.clone().requires_grad_() if t is not None else None for t in (x, r, w)]
    h = exact[0] + exact[1] if residual else exact[0]
    n = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * exact[2]
    torch.autograd.backward((h, n), (dh.double(), dn.double()))
    got = add_rmsnorm(ours[0], ours[1], ours[2]) if residual else rmsnorm(ours[0], ours[2])
    torch.autograd.backward(got, (dh, dn))
    for value, reference in zip(got, (h, n)):
        assert value.dtype == torch.float32 and (value.double() - reference).abs().max() < 1e-5
    for mine, reference in zip(ours, exact):
        if mine is None:
            continue
        error = (mine.grad.double() - reference.grad).abs()
        assert mine.grad.dtype == mine.dtype
        if mine.dtype == torch.bfloat16:  # one bf16 step: to nearest on a GPU, toward zero in the interpreter
            assert (error <= reference.grad.abs() * 2**-7 + 1e-6).all()
        else:
            assert error.max() < 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the norm is written as the next Linear reads it
        assert rmsnorm(x, w)[1].dtype == torch.bfloat16


def test_fused_norms_and_loss_rungs_train_like_the_compiled_norms_rung():
    """The fused-norms rung runs the same model, weights and AdamW through our norm kernels, and the
    fused-loss rung its loss through our cross-entropy too: 5 steps from the same start land where
    the in-backward rung's do, within bf16's tolerance (their sums round in another order), and leave
    the model's own forward untouched."""
    inside = dict(compile="eager", attention="naive", weights="bf16", in_backward=True)
    rungs = (
        Rung("inside", "", **inside),
        Rung("fused", "", **inside, norms="fused"),
        Rung("fused_loss", "", **inside, norms="fused", loss="fused"),
    )
    ladder = Ladder("nano", 16, 2, torch.device("cpu"), rungs)
    run = LadderRun(ladder, {r.name: {} for r in rungs}, settle_seconds=0.0, check_steps=5)
    for rung in rungs:
        run.check(rung, ladder.step(rung))
    losses = {name: row["loss_after_check"] for name, row in run.rows.items()}
    drop = run.initial_loss - losses["inside"]
    assert drop > 0.1
    for name in ("fused", "fused_loss"):
        assert losses[name] != losses["inside"] and abs(losses[name] - losses["inside"]) < 0.02 * drop
    ladder.reset()
    assert ladder.loss() == run.initial_loss


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
    drop = ran.loc["bf16", "initial_loss"] - loss["bf16"]
    assert (ran["check_steps"] == 20).all() and drop > 0.1
    assert (ran["loss_tolerance"] == 0.02).all()  # the smoke grid's target, on every checked row
    assert (ran["power_limit_share"] == 0.97).all()
    assert (loss - loss["bf16"]).abs().max() < 0.02 * drop
    assert "every bf16 rung is within 2% of it" in (smoke_run / "report/final.md").read_text()


def _point(steps: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for order, rung in enumerate(RUNGS):
        if rung.name not in steps:
            rows.append(
                {
                    "rung": rung.name,
                    "order": order,
                    "status": "skipped",
                    "note": "why",
                    "on_ladder": rung.on_ladder,
                    "precision": rung.precision,
                }
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
                "weights": rung.weights,
                "precision": rung.precision,
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
    topped = ladder_section.render(
        _point({**steady, "cuda_graph": [40.0, 41, 39, 40], "bf16_weights": [36.0, 37, 35, 36], "torch_stack": [44.0]})
    )
    assert "`bf16_weights` over the torch stack (`torch_stack`, launched)" in topped  # the top rung that ran


def test_loss_check_names_a_rung_that_trained_differently():
    checked = {"bf16": 7.0, "compile": 7.01, "flash": 7.3}  # flash: 0.3 of a 2.0 drop from 9.0
    point = _point({name: [10.0, 10.1, 9.9] for name in ["baseline", *checked]})
    point["initial_loss"], point["check_steps"], point["check_lr"] = 9.0, 20, 1e-3
    point["loss_after_check"] = point["rung"].map({"baseline": 7.001, **checked})
    text = ladder_section.render(point)
    assert "take `bf16`'s loss from 9.0000 to 7.0000; outside 2% of it: `flash`" in text
    point.loc[point["rung"] == "flash", "loss_after_check"] = 7.02
    assert "every bf16 rung is within 2% of it" in ladder_section.render(point)


def test_loss_check_fails_a_rung_whose_loss_is_not_finite():
    """A rung whose steps turned the weights into NaN fails the check by name, where leaving its row
    out made every other rung pass (at 2.7B naive attention compiled in bf16 did so in every slice)."""
    point = _point({name: [10.0, 10.1, 9.9] for name in ["baseline", "bf16", "compile", "flash"]})
    point["initial_loss"], point["check_steps"], point["check_lr"] = 9.0, 20, 1e-3
    point["loss_after_check"] = point["rung"].map(
        {"baseline": 7.0, "bf16": 7.0, "compile": float("nan"), "flash": 7.01}
    )
    text = ladder_section.render(point)
    assert "**Not finite after the check**: `compile`" in text
    assert "of the rungs with a finite loss, every bf16 rung is within 2% of it" in text
    unchecked = point.assign(check_steps=point["check_steps"].where(point["rung"] != "compile"))
    assert "Not finite" not in ladder_section.render(unchecked)  # its check did not run (out of memory): no claim


def test_section_tables_are_the_csv(smoke_run):
    ladder = read(smoke_run / "results/ladder.csv")
    report = (smoke_run / "report/final.md").read_text()
    assert "## How fast can it train?" in report
    for _, row in ladder[ladder["status"] == "ok"].iterrows():
        assert f"| {row['rung']} " in report and f"{row['median_ms']:.1f} [" in report


def test_bf16_weights_rung_trains_like_the_fp32_weights_rung():
    """The bf16-weights rung swaps bf16 copies of the Linear weights into the shared model and updates
    the fp32 weights as its masters: from the same start, 5 steps land where the fp32-weights rung's do
    (autocast multiplies by the same bf16 values either way), and reset() brings both sets back. With
    each update run from the backward's hooks (the ladder's top rung), the same bf16 weights and masters
    land on the same loss, bit for bit."""
    rungs = (
        Rung("fp32_weights", "", compile="eager", attention="naive"),
        Rung("bf16_weights", "", compile="eager", attention="naive", weights="bf16"),
        Rung("bf16_inside", "", compile="eager", attention="naive", weights="bf16", in_backward=True),
    )
    ladder = Ladder("nano", 16, 2, torch.device("cpu"), rungs)
    ladder.reset()
    initial = ladder.loss()
    losses = {}
    for rung in rungs:
        ladder.reset()
        ladder.before(rung.name)
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[rung.weights]
        assert {linear.weight.dtype for linear in ladder.linears} == {dtype}
        step = ladder.step(rung)
        for _ in range(5):
            step()
        losses[rung.name] = ladder.loss()
    drop = initial - losses["fp32_weights"]
    assert drop > 0.1
    assert abs(losses["bf16_weights"] - losses["fp32_weights"]) < 0.02 * drop
    assert losses["bf16_inside"] == losses["bf16_weights"]
    ladder.reset()
    assert ladder.loss() == initial
    for fp32, bf16 in zip(*ladder.weights.values()):
        assert torch.equal(bf16, fp32.bfloat16())


def test_kernel_table_sums_the_profiled_kernels():
    kernels = pd.DataFrame(
        {
            "rung": ["cuda_graph"] * 3 + ["bf16_weights"] * 2,
            "status": "ok",
            "kernel": ["nvjet_gemm", "triton_poi_fused__to_copy_0", "triton_poi_fused_mul_1", "nvjet_gemm", "adamw"],
            "category": ["gemm", "elementwise", "elementwise", "gemm", "optimizer"],
            "ms_per_step": [100.0, 7.0, 3.0, 99.0, 30.0],
        }
    )
    rows = {r[0]: r[1:] for r in markdown_tables("kernels\n" + ladder_section.kernel_table(kernels), "kernels")}
    assert rows["gemm"] == ["100.0", "99.0"] and rows["elementwise"] == ["10.0", "0.0"]
    assert rows["total"] == ["110.0", "129.0"]
    (sentence,) = ladder_section.kernel_sentences(kernels, "cuda_graph")
    assert "110.0 ms per step): gemm 100.0 ms (91%), elementwise 10.0 ms (9%)" in sentence


def test_roofline_is_refused_where_the_step_beats_the_measured_matmul_rate():
    """100 TFLOP at 500 TF/s need 200 ms, the optimizer's HBM bound is 14 ms. Step kernels of GEMM and
    attention that took 150 ms ran faster than the benchmark's rate: no bound; 250 ms: the bound holds."""
    top = pd.Series(
        {"rung": "cuda_graph", "median_ms": 300.0, "model_tflop_per_step": 100.0, "matmul_tflops": 500.0,
         "optimizer_bound_ms": 14.0}
    )  # fmt: skip

    def kernels(gemm_ms):
        return pd.DataFrame(
            {
                "rung": "cuda_graph",
                "status": "ok",
                "category": ["gemm", "other", "elementwise"],
                "ms_per_step": [gemm_ms - 10, 10.0, 40.0],
            }
        )

    (refused,) = ladder_section.roofline_sentences(top, kernels(150.0))
    assert refused.startswith("- Roofline refused: the step's FLOPs need 200.0 ms at the measured bf16 matmul")
    assert "kernels took 150.0 ms per step (at least 667 TF/s)" in refused
    (bound,) = ladder_section.roofline_sentences(top, kernels(250.0))
    assert bound.startswith("- Roofline: 200.0 ms of FLOPs")
    assert "14.0 ms at the measured HBM bandwidth: 214.0 ms" in bound
    assert "`cuda_graph` takes 300.0 ms, 1.40× the roofline" in bound
    assert ladder_section.roofline_sentences(top) == [bound]  # no kernel times: nothing to refuse it with
    assert ladder_section.roofline_sentences(top, pd.DataFrame()) == [bound]
    no_rates = pd.Series({**top, "matmul_tflops": float("nan")})
    assert ladder_section.roofline_sentences(no_rates) == []


def test_adamw_inside_the_backward_is_the_same_step_and_leaves_other_steps_alone():
    """From the same start, 3 steps with each parameter's AdamW run from its gradient hook land on the
    same weights and state as the plain step, bit for bit (the same elementwise arithmetic, one
    parameter at a time); between those steps the hooks are disarmed, so another rung's backward on
    the shared model updates nothing, and remove() takes them off."""
    rungs = (
        Rung("after", "", compile="eager", attention="naive", optimizer="lmperf"),
        Rung("inside", "", compile="eager", attention="naive", optimizer="lmperf", in_backward=True),
    )
    ladder = Ladder("nano", 16, 2, torch.device("cpu"), rungs)
    weights, state = {}, {}
    for rung in rungs:
        ladder.reset()
        ladder.before(rung.name)
        step = ladder.step(rung)
        for _ in range(3):
            step()
        owner = ladder.optimizers[Ladder.OWNER]
        weights[rung.name] = [p.detach().clone() for p in ladder.model.parameters()]
        state[rung.name] = [s["v"].clone() for s in owner.state.values()]
    for a, b in zip(weights["after"], weights["inside"], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(state["after"], state["inside"], strict=True):
        assert torch.equal(a, b) and bool((a != 0).any())
    (inside,) = ladder.in_backward.values()
    assert not inside.armed
    before = [p.detach().clone() for p in ladder.model.parameters()]
    ladder.model(ladder.tokens).float().mean().backward()  # a backward outside the in-backward step
    assert all(torch.equal(p, q) for p, q in zip(before, ladder.model.parameters()))
    inside.remove()
    assert all(not p._post_accumulate_grad_hooks for p in ladder.model.parameters())


def test_graphed_rungs_take_turns_and_every_replay_is_timed_before_a_profile(monkeypatch, tmp_path):
    """The replay order on a CPU, with a stand-in capture (the launched step as its own "replay"):
    every rung takes TURNS turns, A B A B, block by block, no kernel profile or loss check runs before
    the last turn is timed (a profile was followed by the power limit, notes/ladder-power.md), and
    every capture starts from the initial weights."""
    from lmperf.measure import Budget, turns
    from lmperf.studies import ladder as study

    events = []
    measure = turns.measure

    def timed(steps, *args, **kwargs):
        events.append(("time", *steps))
        return measure(steps, *args, **kwargs)

    def profiled(replay, device, settle_s=0.0):
        events.append(("profile",))
        return pd.DataFrame({"kernel": ["k"], "category": ["gemm"], "calls_per_step": [1.0], "ms_per_step": [1.0]})

    monkeypatch.setattr(Rung, "gpu_only", property(lambda self: ""))
    monkeypatch.setattr(turns, "measure", timed)
    monkeypatch.setattr(study, "kernel_times", profiled)
    loss, made = study.Ladder.loss, []
    monkeypatch.setattr(study.Ladder, "loss", lambda self: events.append(("check",)) or loss(self))
    init = study.Ladder.__init__
    monkeypatch.setattr(study.Ladder, "__init__", lambda self, *a: made.append(self) or init(self, *a))

    def capture(step, device, after_warmup):
        (ladder,) = made
        events.append(("capture", all(torch.equal(v, ladder.initial[k]) for k, v in ladder.model.state_dict().items())))
        return step

    monkeypatch.setattr(study, "capture_graph", capture)
    rungs = [
        Rung("a", "launched", "fp32", "eager", "naive", "lmperf"),
        Rung("b", "graphed", "fp32", "eager", "naive", "lmperf", graphed=True),
        Rung("c", "graphed too", "fp32", "eager", "naive", "lmperf", graphed=True),
    ]
    budget = Budget(min_steps=2, rel_halfwidth=0.5, max_seconds=0.2)
    rows = study.run_ladder(
        study.Point("nano", 16, 2, torch.device("cpu")), 1, budget, 2, rungs, str(tmp_path / "k.csv")
    )
    rows = {row["rung"]: row for row in rows}

    replays = [i for i, e in enumerate(events) if e[0] == "time" and e[1] != "a"]
    assert [events[i][1] for i in replays] == ["b", "c"] * study.TURNS
    while_timed = events[replays[0] : replays[-1]]
    assert ("profile",) not in while_timed and ("check",) not in while_timed
    after = events[replays[-1] :]
    assert after.count(("profile",)) == 2 and after.count(("check",)) == 1 + 3  # the initial loss, then each rung's
    assert events.count(("capture", True)) == 2 * study.TURNS + 2  # turns, then profile and check
    assert ("capture", False) not in events  # each from the initial weights, not those the last turn trained
    for name in ("b", "c"):
        assert rows[name]["replay_turns"] == study.TURNS and rows[name]["status"] == "ok"
        assert len(rows[name]["replay_turn_ms"].split(";")) == study.TURNS
        assert rows[name]["loss_after_check"] < rows[name]["initial_loss"]
    assert "replay_turns" not in rows["a"]  # a launched rung replays only on a GPU
    assert [e[1] for e in events if e[0] == "time"] == ["a", "b", "c"] * study.TURNS  # turns, block by block
    assert rows["a"]["launched_turns"] == study.TURNS and rows["a"]["n_steps"] >= 2 * study.TURNS
    assert rows["a"]["forward_ms"] > 0 and rows["a"]["loss_after_check"] < rows["a"]["initial_loss"]


def test_launched_kernel_profile_starts_from_the_initial_weights(monkeypatch):
    """A launched rung's kernel profile runs after the loss checks have trained the model: it starts
    from the initial weights and an empty AdamW state, as every timed block does (what a GEMM's
    operands are moves its power, notes/ladder-power.md)."""
    from lmperf.studies import ladder as study

    rung = Rung("a", "", "fp32", "eager", "naive", "lmperf")
    ladder = Ladder("nano", 16, 2, torch.device("cpu"), [rung])
    run = LadderRun(ladder, {"a": {"status": "ok"}}, settle_seconds=0.0, check_steps=5)
    run.check(rung, ladder.step(rung))
    assert run.rows["a"]["loss_after_check"] < run.initial_loss  # the check trained the weights
    seen, step_of = [], ladder.step

    def from_start(r, **kwargs):  # the profiled step, noting where its first call (the warm-up) starts
        inner = step_of(r, **kwargs)

        def step():
            if not seen:
                state = ladder.optimizers[Ladder.OWNER].state.values()
                weights = ladder.model.state_dict().items()
                seen.append(
                    all(torch.equal(v, ladder.initial[k]) for k, v in weights)
                    and all(not t.any() for s in state for t in s.values())
                )
            inner()

        return step

    monkeypatch.setattr(ladder, "step", from_start)
    kernels = pd.DataFrame({"kernel": ["k"], "category": ["gemm"], "calls_per_step": [1.0], "ms_per_step": [1.0]})
    monkeypatch.setattr(study, "kernel_times", lambda step, device, settle_s=0.0: kernels)
    profile = run.profile_launched(rung)
    assert seen == [True]
    assert list(profile["rung"]) == ["a"] and list(profile["profiled"]) == ["launched"]
    assert all(p.grad is None for p in ladder.model.parameters())  # released


def test_a_point_in_two_processes_checks_what_one_process_does(tmp_path):
    """The pipeline's two jobs a point: the timed part's CSV, read back by a second part that builds the
    model again, comes out with its columns as written and the same losses after the checks as the
    point run in one process (on a CPU, bit for bit)."""
    from lmperf.measure import Budget
    from lmperf.measure.rows import write_rows
    from lmperf.studies import ladder as study

    rungs = [r for r in RUNGS if r.name in ("baseline", "bf16")]
    point = study.Point("nano", 16, 2, torch.device("cpu"))
    budget = Budget(min_steps=2, rel_halfwidth=0.5, max_seconds=0.1)
    one = {row["rung"]: row for row in study.run_ladder(point, 1, budget, 3, rungs)}

    rows, _ = study.time_ladder(point, 1, budget, rungs)
    assert "loss_after_check" not in rows["bf16"]
    write_rows(list(rows.values()), tmp_path / "timed.csv")
    checked = study.check_timed(point, str(tmp_path / "timed.csv"), 3, kernels_out=None, rungs=rungs)
    write_rows(checked, tmp_path / "point.csv")

    timed, final = (
        pd.read_csv(tmp_path / name, dtype=str, keep_default_na=False) for name in ("timed.csv", "point.csv")
    )
    assert final[timed.columns].equals(timed)
    for row in checked:
        assert row["loss_after_check"] == one[row["rung"]]["loss_after_check"] < row["initial_loss"]
        assert row["initial_loss"] == one[row["rung"]]["initial_loss"]


def test_a_rungs_first_call_counts_as_warm_up_in_the_jobs_cost_split():
    """A rung's first call compiles and autotunes (at 2.7B for minutes): the job's cost split names it
    warm-up, not an unattributed remainder."""
    from lmperf.measure import Budget, phases
    from lmperf.studies import ladder as study

    calls = []

    def step():
        if not calls:
            time.sleep(0.3)  # the first call "compiles"
        calls.append(1)

    phases.reset()
    budget = Budget(min_steps=2, rel_halfwidth=0.5, max_seconds=0.05)
    study.timed_block("rung", step, torch.device("cpu"), 1, budget, 0.0, None)
    assert phases.split()["warmup"] >= 0.3
    phases.reset()


def test_the_loss_checks_count_as_check_in_the_jobs_cost_split():
    """A checked job trains every rung for its loss check (at 2.7B most of the job): its cost split
    names that time check, not an unattributed remainder."""
    from lmperf.measure import phases

    rung = RUNGS[0]
    ladder = Ladder("nano", 16, 2, torch.device("cpu"), (rung,))
    run = LadderRun(ladder, {rung.name: {}}, settle_seconds=0.0, check_steps=2)
    step = ladder.step(rung)
    phases.reset()
    run.check(rung, lambda: (time.sleep(0.2), step()))
    split = phases.split()
    assert split["check"] >= 0.4 and split["check"] > 10 * split["other"]
    assert run.rows[rung.name]["check_steps"] == 2
    phases.reset()


def test_a_checked_part_needs_its_timed_part():
    from lmperf.studies import ladder as study

    with pytest.raises(SystemExit):
        study.main(["--size", "nano", "--context-length", "16", "--part", "checked", "--out", "x.csv"])


def test_a_rung_list_runs_in_ladder_order_and_an_unknown_rung_is_named():
    from lmperf.studies import ladder as study

    assert [r.name for r in study.rung_list("torch_stack,fused_loss")] == ["fused_loss", "torch_stack"]
    with pytest.raises(SystemExit):
        study.main(["--size", "nano", "--context-length", "16", "--rungs", "fused_loss,fast", "--out", "x.csv"])
    with pytest.raises(argparse.ArgumentTypeError, match="unknown rung fast"):
        study.rung_list("fused_loss,fast")


NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NO_CUDA)])
def test_reset_brings_back_the_initial_weights_from_a_host_copy_of_its_own(device):
    """Every timed block starts from the weights the model was built with: the host copy they come back
    from is the ladder's own (no storage shared with the model), so a step that changes the weights in
    place cannot change it. On a GPU the copy is page-locked and the reset does not wait for it; the
    next work on the stream still sees exactly the initial weights."""
    ladder = Ladder("nano", 32, 2, torch.device(device), rungs=(RUNGS[0],))
    built = {k: v.clone() for k, v in ladder.model.state_dict().items()}
    shared = {v.untyped_storage().data_ptr() for v in ladder.model.state_dict().values()}
    for v in ladder.initial.values():
        assert v.device.type == "cpu" and v.untyped_storage().data_ptr() not in shared
        assert v.is_pinned() == (device == "cuda")
    with torch.no_grad():
        for p in ladder.model.parameters():
            p.mul_(-3.0).add_(1.0)
    ladder.reset()
    for key, value in ladder.model.state_dict().items():
        assert torch.equal(value, built[key]), key


def test_section_names_the_sizes_e2e_measured_and_the_ladder_did_not():
    point = _point({"baseline": [100.0, 101, 99], "bf16": [50.0, 51, 49]})
    ladder = pd.concat([point, point.assign(size="2.7B")], ignore_index=True)
    e2e = pd.DataFrame({"size": ["2.7B", "medium", "small", "xl", "large"]})
    assert ladder_section.sizes_left_out(ladder, e2e).startswith(
        "This run's ladder ran at small and 2.7B, not at medium, large and xl, which e2e measured (the grid's "
        "`ladder.sizes`"
    )
    assert ladder_section.sizes_left_out(ladder, e2e[e2e["size"].isin(["small", "2.7B"])]) == ""
    assert ladder_section.sizes_left_out(ladder, None) == ""


def test_the_smoke_report_names_the_size_its_ladder_left_out(smoke_run):
    """The smoke grid's ladder runs nano, its e2e nano and tiny."""
    assert (
        "This run's ladder ran at nano, not at tiny, which e2e measured" in (smoke_run / "report/final.md").read_text()
    )
