"""Kernel tables from either profiler: categories by name, and attribution to named ranges.

Nsight Systems reports CUDA kernel names (``ampere_sgemm_128x64_tn``, ``void at::native::
vectorized_elementwise_kernel<...>``); torch.profiler on a CPU reports operator names
(``aten::mm``). The first rule that matches wins, so the order below matters: a softmax
kernel is not counted as a reduction, a fused multi-tensor Adam kernel not as elementwise.

A unit of work (a kernel, or an operator on a CPU) belongs to the named ranges that were open on the
host when it was launched: that is how Nsight projects NVTX ranges onto the GPU, and it works the
same for both profilers' timestamps.
"""

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

CATEGORIES = ("gemm", "attention-softmax", "elementwise", "reduction", "optimizer", "memcpy", "other")

RULES: list[tuple[str, re.Pattern]] = [
    ("other", re.compile(r"nccl", re.I)),  # communication (AllReduce is no compute reduction)
    ("memcpy", re.compile(r"memcpy|memset|aten::copy_|aten::to\b|aten::_to_copy", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|adam|_foreach_|fused_adamw?", re.I)),
    ("attention-softmax", re.compile(r"softmax", re.I)),
    (
        "gemm",
        re.compile(
            r"gemm|cutlass|xmma|nvjet|wgmma|cublas|\bmm\b|aten::(mm|bmm|addmm|matmul|linear|einsum)\b|_mm_", re.I
        ),
    ),
    ("reduction", re.compile(r"reduce|rmsnorm|aten::(sum|mean|amax|max|min|norm|logsumexp)\b|triton_(per|red)_", re.I)),
    (
        "elementwise",
        re.compile(
            r"elementwise|vectorized|pointwise|triton_poi_|aten::(add|sub|mul|div|exp|log|sqrt|rsqrt|pow|"
            r"sigmoid|silu|neg|where|masked_fill|cat|stack|index|gather|embedding|tril|triu|ones|zeros|fill_)",
            re.I,
        ),
    ),
]

# The ranges the tables are keyed by (lmperf.ranges names them; other ranges, e.g. nsys's per-operator
# autograd ranges, are ignored).
STEP_RANGES = ("measured step", "warmup step")
PHASE_RANGES = ("forward", "backward", "optimizer step")
ATTENTION_RANGES = ("attention scores", "softmax", "final matmul")
NAMED_RANGES = (*STEP_RANGES, *PHASE_RANGES, *ATTENTION_RANGES)
COLUMNS = ["range", "kernel", "category", "instances", "instances_per_step", "total_ms", "mean_us"]

Spans = dict[str, tuple[tuple[float, ...], tuple[float, ...]]]


def categorize(kernel_name: str) -> str:
    for category, pattern in RULES:
        if pattern.search(kernel_name):
            return category
    return "other"


def spans_by_name(ranges: Iterable[tuple[str, float, float]]) -> Spans:
    """Per named range, its (starts, ends), sorted and with overlapping spans merged: a range opened
    twice at once (by NVTX and again by record_function under nsys's autograd-nvtx) counts once."""
    by_name = defaultdict(list)
    for name, start, end in ranges:
        if name in NAMED_RANGES:
            by_name[name].append((start, end))
    spans = {}
    for name, pairs in by_name.items():
        merged = []
        for start, end in sorted(pairs):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        spans[name] = (tuple(s for s, _ in merged), tuple(e for _, e in merged))
    return spans


def innermost(spans: Spans, t: float, names) -> str | None:
    """The innermost (latest-starting) range among ``names`` whose span contains time t.

    Spans of one name never overlap (spans_by_name merged them), so only the last one starting at
    or before t can contain it: a bisection, not a scan (a profiled xl step has thousands of ranges
    and tens of thousands of kernels).
    """
    best = None
    for name in names:
        starts, ends = spans.get(name, ((), ()))
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= ends[i] and (best is None or starts[i] > best[0]):
            best = (starts[i], name)
    return best[1] if best else None


def in_measured_steps(spans: Spans, name: str) -> list[tuple[float, float]]:
    """The (start, end) of each ``name`` range that starts inside a measured step."""
    starts, ends = spans.get(name, ((), ()))
    return [(s, e) for s, e in zip(starts, ends) if innermost(spans, s, STEP_RANGES) == "measured step"]


def where(spans: Spans, t: float) -> str | None:
    """'forward/softmax', 'backward', … for work launched at t in a measured step; None outside one."""
    if innermost(spans, t, STEP_RANGES) != "measured step":
        return None
    phase = innermost(spans, t, PHASE_RANGES) or "other"
    sub = innermost(spans, t, ATTENTION_RANGES) if phase == "forward" else None
    return f"{phase}/{sub}" if sub else phase


def kernel_table(launches: Iterable[tuple[float, str, float]], spans: Spans, steps: int) -> pd.DataFrame:
    """Aggregate (launch time, name, duration in µs) by (range, name) over the measured steps."""
    totals = defaultdict(lambda: [0, 0.0])
    for t, name, us in launches:
        at = where(spans, t)
        if at is not None:
            totals[(at, name)][0] += 1
            totals[(at, name)][1] += us
    rows = [
        {
            "range": at,
            "kernel": name[:200],
            "category": categorize(name),
            "instances": n,
            "instances_per_step": n / steps,
            "total_ms": us / 1e3,
            "mean_us": us / n,
        }
        for (at, name), (n, us) in totals.items()
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values("total_ms", ascending=False).reset_index(drop=True)
