"""What only a CUDA device can show: the graphed step is the launched step, replayed.

Skipped on CPU-only machines (CI); run on a GPU with `pytest tests/test_gpu.py`.
"""

import pytest
import torch

from lmperf.measure import Budget, capture_graph, free_memory
from lmperf.measure.harness import BenchmarkSpec, run_benchmark, time_point
from lmperf.model import make_optimizer
from lmperf.training import build_model, make_step, random_batch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CUDA = torch.device("cuda")


def _kernel_names(run) -> list[str]:
    """The kernels one call of ``run`` launches, copies and memsets left out."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return [
        e.name
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and "memcpy" not in e.name.lower()
        and "memset" not in e.name.lower()
    ]


def _kernels(run) -> int:
    return len(_kernel_names(run))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_graphed_train_step_runs_the_launched_kernels(precision):
    model = build_model("nano", 64, CUDA)
    optimizer = make_optimizer("lmperf", model.parameters())
    tokens, targets = random_batch(model.cfg.vocab_size, 4, 64, CUDA)
    step = make_step("train_step", model, optimizer, tokens, targets, precision, CUDA)
    for _ in range(3):
        step()
    launched = _kernels(step)
    replay = capture_graph(step, CUDA)
    graphed = _kernels(replay)
    assert launched > 50
    assert graphed == launched


def test_graph_replays_train_like_launched_steps():
    """Replays advance the weights exactly as launched steps do (the optimizer's step count on the device)."""

    def trained(graphed: bool) -> list[torch.Tensor]:
        model = build_model("nano", 32, CUDA)
        optimizer = make_optimizer("lmperf", model.parameters(), lr=1e-2)
        tokens, targets = random_batch(model.cfg.vocab_size, 4, 32, CUDA)
        step = make_step("train_step", model, optimizer, tokens, targets, "fp32", CUDA)
        step()  # optimizer state exists before capture
        if graphed:  # capture_graph's warm-up is step 2; capturing records without running; replays are 3-6
            replay = capture_graph(step, CUDA, warmup_steps=1)
            for _ in range(4):
                replay()
        else:
            for _ in range(5):
                step()
        torch.cuda.synchronize()
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(trained(False), trained(True)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_every_attention_variant_is_graphed(compiled):
    spec = BenchmarkSpec(
        "nano",
        (64,),
        precision="bf16",
        compile=compiled,
        attentions=("naive", "sdpa", "flash_triton"),
        warmup_steps=2,
        budget=Budget(min_steps=5, max_seconds=1),
    )
    rows = run_benchmark(spec, device=CUDA)
    assert len(rows) == 9
    for row in rows:
        assert row["status"] == "ok", row
        assert row["graphed_median_ms"] > 0, row["note"]
        assert row["graphed_median_ms"] <= row["median_ms"] * 1.05, row


def test_a_point_needs_about_one_step_of_memory_beside_the_model():
    """The variants' graphs are captured one at a time, each dropped after its block, and only the
    first capture warms up: a warm-up beside a captured graph needs a second step's memory, which at
    2.7B, context 1024 does not fit."""
    model = build_model("small", 512, CUDA)
    optimizer = make_optimizer("lmperf", model.parameters())
    tokens, targets = random_batch(model.cfg.vocab_size, 8, 512, CUDA)
    step = make_step("train_step", model, optimizer, tokens, targets, "bf16", CUDA)
    step()
    torch.cuda.synchronize()
    free_memory(CUDA)
    persistent = torch.cuda.memory_allocated()  # weights, optimizer state, gradients
    torch.cuda.reset_peak_memory_stats()
    step()
    one_step = torch.cuda.max_memory_allocated() - persistent
    attentions = ("naive", "sdpa", "flash_triton")
    spec = BenchmarkSpec("small", (512,), 8, "bf16", attentions=attentions, budget=Budget(min_steps=3, max_seconds=0.2))
    free_memory(CUDA)
    torch.cuda.reset_peak_memory_stats()
    results = time_point(step, model, spec, CUDA)
    assert all(r["graphed_median_ms"] > 0 for r in results.values()), results
    assert torch.cuda.max_memory_reserved() - persistent < 1.6 * one_step


def test_fused_adamw_writes_the_masters_rounding_to_nearest():
    """On a GPU the bf16 weight is exactly the fp32 master rounded to nearest even, as torch rounds it."""
    torch.manual_seed(0)
    weight = torch.randn(4096, 1024, device=CUDA).bfloat16().requires_grad_()
    optimizer = make_optimizer("lmperf_fused", [weight], lr=1e-2)
    for _ in range(3):
        weight.grad = torch.randn_like(weight)
        optimizer.step()
    assert torch.equal(weight, optimizer.state[weight]["master"].bfloat16())


@pytest.mark.parametrize("optimizer_name", ["lmperf", "lmperf_fused"])
def test_adamw_inside_the_backward_replays_as_the_step_after_it(optimizer_name):
    """The optimizer run from the backward's gradient hooks on a side stream, launched and replayed as
    a CUDA graph (the side stream forks from and joins the capture), trains as the plain step does,
    and its replay runs the plain step's kernels."""
    from lmperf.model.optim_in_backward import OptimizerInBackward

    def trained(inside: bool, graphed: bool):
        model = build_model("nano", 32, CUDA)
        optimizer = make_optimizer(optimizer_name, model.parameters(), lr=1e-2)
        if inside:
            optimizer = OptimizerInBackward(optimizer)
        tokens, targets = random_batch(model.cfg.vocab_size, 4, 32, CUDA)
        step = make_step("train_step", model, optimizer, tokens, targets, "bf16", CUDA)
        step()
        if graphed:
            run = capture_graph(step, CUDA)  # its warm-up is one more step
        else:
            step()  # the same count of steps as the graphed runs
            run = step
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        return [p.detach().clone() for p in model.parameters()], _kernels(run)

    (plain, kernels), (launched, _), (replayed, replayed_kernels) = (
        trained(False, True),
        trained(True, False),
        trained(True, True),
    )
    for a, b, c in zip(plain, launched, replayed, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, a, rtol=1e-5, atol=1e-6)
    assert replayed_kernels >= kernels  # one update per parameter instead of per chunk: never fewer


def test_compiled_attention_backward_takes_the_output_gradient_in_place():
    """Our attention returns its heads merged, so inductor hands the output projection's gradient to
    the backward kernels as it is, with no copy (a clone fused with the backward's empty_like). Under
    torch.compile each pass is one opaque op that takes the gradient in the layout it comes in, so
    the unmerged (batch, heads, seq, d) interface is copied no more either."""
    from lmperf.attention import FlashAttentionTriton, flash_triton_attention
    from lmperf.model import model_config
    from lmperf.model.transformer import RotaryEmbedding, TransformerBlock

    def copies(attention) -> list[str]:
        torch._dynamo.reset()
        cfg = model_config("small", 128)
        torch.manual_seed(0)
        block = TransformerBlock(cfg, RotaryEmbedding(cfg.d_head, 128, cfg.rope_theta, CUDA), attention, CUDA)
        block.compile(dynamic=False)
        x = torch.randn(2, 128, cfg.d_model, device=CUDA, requires_grad=True)

        def run():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                block(x).sum().backward()

        run()
        return [name for name in _kernel_names(run) if "clone" in name and "empty_like" in name]

    def unmerged(q, k, v, is_causal=False):
        return FlashAttentionTriton.apply(q, k, v, is_causal)

    assert copies(flash_triton_attention) == []
    assert copies(unmerged) == []
    torch._dynamo.reset()


def test_settled_graphed_rows_carry_the_clock_and_power_they_ran_at():
    """With settle_seconds, a point's replays run untimed first, and every graphed row records the SM
    clock and power sampled while it was timed (what the e2e-against-ladder check compares)."""
    spec = BenchmarkSpec(
        size="small",
        context_lengths=(128,),
        precision="bf16",
        attentions=("naive", "sdpa"),
        warmup_steps=1,
        budget=Budget(min_steps=5, max_seconds=1),
        settle_seconds=0.5,
    )
    rows = run_benchmark(spec, modes=("train_step",), device=CUDA)
    for row in rows:
        assert row["status"] == "ok" and row["settle_seconds"] == 0.5, row
        assert row["graphed_gpu_samples"] > 0 and row["graphed_sm_clock_mhz"] > 0, row["graphed_gpu_note"]
        assert row["graphed_power_w"] > 0


def test_tiled_pytorch_backward_stays_compiled_across_a_sweep():
    """The sweep times the tiled PyTorch attention at six lengths, its backward reached with a dense
    gradient (backward) and a broadcast one (forward + backward): 12 compiled graphs; here seven
    lengths, 14. None may fall back to eager at torch's recompile limit (8), and every gradient
    matches float64."""
    from lmperf.attention import FlashAttentionPyTorch, naive_attention

    torch._dynamo.reset()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        for seq in (16, 32, 48, 64, 80, 96, 112):
            q, k, v = (torch.randn(1, seq, 16, device=CUDA, requires_grad=True) for _ in range(3))
            for dense in (True, False):
                out = FlashAttentionPyTorch.apply(q, k, v, True)
                if dense:
                    out.backward(torch.ones_like(out))
                else:
                    out.sum().backward()
                wide = [t.detach().double().requires_grad_() for t in (q, k, v)]
                naive_attention(*wide, is_causal=True).sum().backward()
                for got, want in zip((q.grad, k.grad, v.grad), wide, strict=True):
                    torch.testing.assert_close(got.double(), want.grad, rtol=1e-4, atol=1e-5)
                q.grad = k.grad = v.grad = None
    torch._dynamo.reset()
