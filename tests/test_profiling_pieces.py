"""Profiler ranges (nested right, free when off), the annotated attention, and the kernel categorizer."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from lmperf import ranges
from lmperf.attention import annotated_attention, naive_attention
from lmperf.measure import Budget
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.measure.kernels import CATEGORIES, categorize


@pytest.fixture
def profiling():
    ranges.enable()
    yield
    ranges.enable(False)


def _events(prof):
    return [
        e
        for e in prof.events()
        if e.name
        in {
            "warmup step",
            "measured step",
            "forward",
            "backward",
            "optimizer step",
            "attention scores",
            "softmax",
            "final matmul",
        }
    ]


def test_ranges_are_free_when_off():
    assert not ranges.enabled()
    assert ranges.profiled_range("a") is ranges.profiled_range("b")  # one shared no-op context
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_benchmark(
            BenchmarkSpec("nano", (8,), warmup_steps=1, budget=Budget(1, max_steps=1)),
            modes=["train_step"],
            device=torch.device("cpu"),
        )
    assert _events(prof) == []


def test_train_step_ranges_nest_under_measured_steps(profiling):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_benchmark(
            BenchmarkSpec("nano", (8,), attentions=("annotated",), warmup_steps=1, budget=Budget(2, max_steps=2)),
            modes=["train_step"],
            device=torch.device("cpu"),
        )
    events = _events(prof)
    names = [e.name for e in events]
    assert names.count("warmup step") == 1 and names.count("measured step") == 2
    assert names.count("optimizer step") == 3 and names.count("backward") == 3
    assert names.count("softmax") == 3 * 2  # one per layer (nano has 2) per forward

    def inside(inner, outer):
        return outer.time_range.start <= inner.time_range.start and inner.time_range.end <= outer.time_range.end

    steps = [e for e in events if e.name.endswith(" step") and e.name != "optimizer step"]
    for event in events:
        if event.name in ("forward", "backward", "optimizer step"):
            assert sum(inside(event, step) for step in steps) == 1
    forwards = [e for e in events if e.name == "forward"]
    for event in events:
        if event.name in ("attention scores", "softmax", "final matmul"):
            assert any(inside(event, f) for f in forwards)


def test_annotated_attention_is_naive_attention():
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    torch.testing.assert_close(annotated_attention(q, k, v, is_causal=True), naive_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize(
    "name, category",
    [
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "gemm",
        ),
        ("ampere_sgemm_128x64_tn", "gemm"),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
        ("cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>", "gemm"),
        ("aten::mm", "gemm"),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>",
            "attention-softmax",
        ),
        ("aten::_softmax", "attention-softmax"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
            "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >",
            "elementwise",
        ),
        ("triton_poi_fused_add_mul_0", "elementwise"),
        ("aten::mul", "elementwise"),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, "
            "unsigned int, float, 4> >",
            "reduction",
        ),
        ("triton_red_fused_mean_pow_1", "reduction"),
        ("aten::sum", "reduction"),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
            "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4> >",
            "optimizer",
        ),
        ("aten::_foreach_addcdiv_", "optimizer"),
        ("[CUDA memcpy Host-to-Device]", "memcpy"),
        ("[CUDA memset]", "memcpy"),
        ("aten::copy_", "memcpy"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "other"),
    ],
)
def test_categorizer(name, category):
    assert category in CATEGORIES
    assert categorize(name) == category
