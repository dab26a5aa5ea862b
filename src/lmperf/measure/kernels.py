"""Kernel categories for profile tables, by name, from either profiler.

Nsight Systems reports CUDA kernel names (``ampere_sgemm_128x64_tn``, ``void at::native::
vectorized_elementwise_kernel<...>``); torch.profiler on a CPU reports operator names
(``aten::mm``). The first rule that matches wins, so the order below matters: a softmax
kernel is not counted as a reduction, a fused multi-tensor Adam kernel not as elementwise.
"""

import re

CATEGORIES = ("gemm", "attention-softmax", "elementwise", "reduction", "optimizer", "memcpy", "other")

RULES: list[tuple[str, re.Pattern]] = [
    ("other", re.compile(r"nccl", re.I)),  # communication (AllReduce is no compute reduction)
    ("memcpy", re.compile(r"memcpy|memset|aten::copy_|aten::to\b|aten::_to_copy", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|adam|_foreach_|fused_adamw?", re.I)),
    ("attention-softmax", re.compile(r"softmax", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|xmma|nvjet|wgmma|cublas|\bmm\b|aten::(mm|bmm|addmm|matmul|linear|einsum)\b|_mm_", re.I)),
    ("reduction", re.compile(r"reduce|aten::(sum|mean|amax|max|min|norm|logsumexp)\b|triton_(per|red)_", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|pointwise|triton_poi_|aten::(add|sub|mul|div|exp|log|sqrt|rsqrt|pow|"
                               r"sigmoid|silu|neg|where|masked_fill|cat|stack|index|gather|embedding|tril|triu|ones|zeros|fill_)",
                               re.I)),
]


def categorize(kernel_name: str) -> str:
    for category, pattern in RULES:
        if pattern.search(kernel_name):
            return category
    return "other"
