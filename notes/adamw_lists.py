# pinned: 55c7d3b2b16b  (uses lmperf internals; run it from a checkout of that commit)
# internals: fused_adamw._listable
"""Does one launch for many parameters lift the fused AdamW to 85% of the copy bandwidth at 28 B/param?
(At small it ran at 80%, report/reference/h100/ladder-grid/.)

Ran at: 55c7d3b2b16b (H100 80GB HBM3), output: report/reference/h100/ladder-grid-55c7d3b/adamw-lists.txt
    (an earlier run of the list kernel before its fix: adamw-lists-first-run.txt beside it)

For each size, the model's parameter shapes on the GPU with gradients, and three arms in turns,
A B C A B C: ``one`` (our kernel, one launch per parameter, as before), ``list`` (our kernel, one
launch per dtype pair through its address table) and ``torch`` (torch.optim.AdamW(fused=True)),
each step replayed as a CUDA graph and timed by triton.testing.do_bench_cudagraph (median). Both
weight layouts: fp32 parameters, and bf16 ones with fp32 masters (our kernels only).

    PYTHONPATH=src python notes/adamw_lists.py 3 small medium large > adamw-lists.txt
"""

import sys

import torch
from triton.testing import do_bench_cudagraph

from lmperf.measure.flops import ADAMW_BYTES_PER_PARAM
from lmperf.model import fused_adamw, make_optimizer
from lmperf.model.sizes import model_config
from lmperf.model.transformer import TransformerLM
from lmperf.studies.ladder import device_rates


def one_launch_each(optimizer):
    """``optimizer``'s step as it was before the tables: one launch per parameter."""

    def step():
        listable, fused_adamw._listable = fused_adamw._listable, lambda p, s: False
        try:
            optimizer.step()
        finally:
            fused_adamw._listable = listable

    return step


rounds, sizes = int(sys.argv[1]), sys.argv[2:]
device = torch.device("cuda")
copy_gbps = device_rates(device)["hbm_gbps"]
print(f"copy bandwidth {copy_gbps:.0f} GB/s")
print("size weights round arm median_ms gbps share_of_copy")

for size in sizes:
    with torch.device("meta"):
        shapes = [p.shape for p in TransformerLM(model_config(size, 1024)).parameters()]
    n = sum(s.numel() for s in shapes)
    for weights in (torch.float32, torch.bfloat16):
        params = [torch.randn(s, device=device).to(weights).requires_grad_() for s in shapes]
        for p in params:
            p.grad = torch.randn_like(p) * 1e-3
        ours = make_optimizer("lmperf_fused", params, lr=1e-4)
        arms = {"one": one_launch_each(ours), "list": ours.step}
        if weights == torch.float32:
            arms["torch"] = make_optimizer("torch_fused", params, lr=1e-4).step
        for step in arms.values():
            step()  # the state made outside the graph
        for turn in range(rounds):
            for arm, step in arms.items():
                ms = do_bench_cudagraph(step, rep=200)
                gbps = ADAMW_BYTES_PER_PARAM * n / ms / 1e6
                print(
                    f"{size} {str(weights)[6:]} {turn + 1} {arm} {ms:.4f} {gbps:.0f} {gbps / copy_gbps:.3f}", flush=True
                )
        del params, ours, arms
        torch.cuda.empty_cache()
