"""Why could the e2e harness not capture the 2.7B train step at context 1024 as a CUDA graph?

Ran at: 49213762441f (H100 80GB HBM3), output: the table of notes/graph-capture-memory.md, section 3 (not
    kept as a file); an earlier form, between 13a0049b4367 and 49213762441f, gave section 2's segments

Runs the harness's train step at 2.7B, context 1024, bf16, compiled blocks, with naive, SDPA and
our attention, as the e2e study does. A tiny capture first warms the capture stream, as the e2e
process's earlier (smaller) points do. Around each capture it prints what is allocated, and where
a capture fails, the allocator's segments by pool and stream.

    python notes/graph_capture_memory.py                # lmperf's default: expandable segments
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False python notes/graph_capture_memory.py
"""

from collections import Counter

import torch

from lmperf.measure import harness, timing
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.measure.timing import Budget

GiB = 2**30
capture_graph = timing.capture_graph


def segments() -> None:
    """Allocated and reserved bytes per (pool, stream): (0, 0) is the default pool."""
    sizes = Counter()
    for segment in torch.cuda.memory_snapshot():
        key = (str(segment.get("segment_pool_id")), segment.get("stream"))
        sizes[(*key, "allocated")] += segment["allocated_size"]
        sizes[(*key, "reserved")] += segment["total_size"]
    for key, n in sorted(sizes.items()):
        print(f"    pool {key[0]} stream {key[1]} {key[2]}: {n / GiB:.2f} GiB", flush=True)


def reported_capture(step, device, pool=None, warmup_steps=1, after_warmup=None):
    print(f"capture (warm-up {warmup_steps}): {torch.cuda.memory_allocated() / GiB:.2f} GiB allocated", flush=True)

    def hook():
        if after_warmup is not None:
            after_warmup()
        print(f"  after the warm-up hook: {torch.cuda.memory_allocated() / GiB:.2f} GiB allocated", flush=True)

    try:
        return capture_graph(step, device, pool, warmup_steps=warmup_steps, after_warmup=hook)
    except timing.GraphUnavailable:
        segments()
        raise


def main() -> None:
    harness.capture_graph = reported_capture
    capture_graph(lambda: torch.ones(4, device="cuda").sum(), torch.device("cuda"))
    spec = BenchmarkSpec(
        "2.7B",
        (1024,),
        4,
        "bf16",
        compile=True,
        attentions=("naive", "sdpa", "flash_triton"),
        warmup_steps=1,
        budget=Budget(min_steps=3, max_seconds=1),
    )
    for row in run_benchmark(spec, modes=["train_step"]):
        print(
            row["attention"], row["status"], row.get("median_ms"), row.get("graphed_median_ms"), str(row["note"])[:160]
        )


if __name__ == "__main__":
    main()
