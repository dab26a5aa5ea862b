"""Which compiled attention gives NaN gradients in bf16: the softmax's maximum, the scale, the backend.

At 2.7B (head size 80) naive attention compiled in bf16 turned every weight NaN in its first train
steps (notes/one-allocation.md, section 10). This reproduces it on a CPU with one attention call
(batch 2, 4 heads, 256 queries, causal): per variant, compiled by inductor (or ``aot_eager``), whether
the gradients of q, k and v are finite. The softmax is written out as lmperf's was, ``x - x.amax()``,
and as it is now, with the maximum detached. Last, lmperf's naive attention now against float64.

    PYTHONPATH=src python notes/naive_softmax_nan.py > notes/logs/<date>-naive_softmax_nan.txt

Ran at: 26adbb653302 (this 2-core CPU machine, torch 2.13), this script uncommitted then (its last
    part, the accuracy against float64, added and run at 4846d0b96f85, with naive attention as then),
    output: notes/logs/2026-11-29-naive_softmax_nan-26adbb6-cpu.txt
"""

import math

import torch


def softmax_then(x):  # lmperf's softmax before 5fd75af
    exp = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exp / exp.sum(dim=-1, keepdim=True)


def softmax_now(x):  # the maximum detached
    exp = torch.exp(x - x.amax(dim=-1, keepdim=True).detach())
    return exp / exp.sum(dim=-1, keepdim=True)


def attention(softmax, scale_first=False, fp32_scores=False):
    def call(q, k, v):
        d = q.shape[-1]
        q = q / math.sqrt(d) if scale_first else q
        scores = q @ k.transpose(-1, -2)
        scores = scores.float() if fp32_scores else scores
        scores = scores if scale_first else scores / math.sqrt(d)
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
        return softmax(scores.masked_fill(mask, float("-inf"))).to(v.dtype) @ v

    return call


VARIANTS = {
    "softmax as before": (attention(softmax_then), "inductor"),
    "softmax as before, aot_eager": (attention(softmax_then), "aot_eager"),
    "softmax as before, q scaled first": (attention(softmax_then, scale_first=True), "inductor"),
    "softmax as before, scores in fp32": (attention(softmax_then, fp32_scores=True), "inductor"),
    "torch.softmax": (attention(lambda x: torch.softmax(x, -1)), "inductor"),
    "softmax now (maximum detached)": (attention(softmax_now), "inductor"),
}


def main():
    print(f"torch {torch.__version__}, bf16, inductor on the CPU")
    for d in (64, 80, 96):
        torch.manual_seed(0)
        q, k, v = (torch.randn(2, 4, 256, d, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        for name, (function, backend) in VARIANTS.items():
            torch._dynamo.reset()
            torch.compile(function, backend=backend)(q, k, v).float().sum().backward()
            finite = [bool(torch.isfinite(x.grad).all()) for x in (q, k, v)]
            print(f"d {d:>3}  {name:36s} gradients of q, k, v finite: {finite}", flush=True)
            q.grad = k.grad = v.grad = None


def accuracy():
    """The gradients of lmperf's naive attention now, bf16, eager and compiled, against float64's:
    relative error (Frobenius norm) of q's, k's and v's."""
    from lmperf.attention.naive import naive_attention

    for d in (64, 80):
        torch.manual_seed(0)
        q, k, v = (torch.randn(2, 4, 256, d, dtype=torch.float64) for _ in range(3))
        exact = [x.clone().requires_grad_() for x in (q, k, v)]
        naive_attention(*exact, is_causal=True).sum().backward()
        for name, function in (("eager", naive_attention), ("compiled", torch.compile(naive_attention))):
            low = [x.bfloat16().requires_grad_() for x in (q, k, v)]
            function(*low, is_causal=True).float().sum().backward()
            errors = [float((x.grad.double() - e.grad).norm() / e.grad.norm()) for x, e in zip(low, exact)]
            print(
                f"d {d:>3}  naive_attention {name:8s} relative error of q, k, v gradients: "
                + ", ".join(f"{e:.4f}" for e in errors),
                flush=True,
            )
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
    accuracy()
