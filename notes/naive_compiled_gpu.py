"""Why does compiled naive attention raise the 2.7B model's loss on a GPU, where ours lowers it?

After its maximum was detached (notes/naive_softmax_nan.py), naive attention compiled by inductor in
bf16 no longer made the 2.7B model's weights NaN in its first step, but on an H200 ten train steps
with it raised the loss from 7.25 to 8.40, where ours lowered it, and twenty broke the weights
(notes/one-allocation.md, section 10). On this CPU its gradients are accurate. This looks on the GPU,
as the model runs it (bf16 autocast):

1. one attention call at the model's shape (batch 4, 32 heads, 1024 queries, causal, head size 80,
   and 64 for comparison): naive eager, naive compiled, SDPA and ours, against naive in float64;
2. the 2.7B model at one set of weights: each attention's loss, compiled and eager, against SDPA in
   fp32, and its gradients against SDPA's in fp32;
3. twenty (``--steps``) train steps of each from the same weights (lmperf's AdamW at its default rate).

    PYTHONPATH=src python notes/naive_compiled_gpu.py [--size 2.7B] [--context-length 1024] [--steps 20] > notes/logs/<date>-naive_compiled_gpu.txt

Ran at: 22b14b2e7c6a (NVIDIA H200, torch 2.11), the script as then (20 steps, no count of
    non-finite weights, a warning in the output), output: notes/logs/2026-11-29-naive_compiled_gpu-22b14b2-h200.txt
Ran at: 541afc874526 (NVIDIA H200, torch 2.11), ``--steps 60``, the script as then (since, only
    docstrings and a detach that silences a warning in the outputs),
    output: notes/logs/2026-11-29-naive_compiled_gpu-541afc8-h200.txt
"""

import argparse
import math

import torch

from lmperf.attention import get_attention
from lmperf.model import cross_entropy, make_optimizer
from lmperf.training import autocast_context, build_model, compile_blocks, random_batch, use_attention

CUDA = torch.device("cuda")
EAGER = "force_eager"


def relative(a, b):
    """|a - b| / |b| over whole tensors (or lists of tensors), in float64."""
    a, b = ([x] if torch.is_tensor(x) else x for x in (a, b))
    a, b = ([x.detach().double() for x in xs] for xs in (a, b))
    diff = sum(float((x - y).norm() ** 2) for x, y in zip(a, b, strict=True))
    return math.sqrt(diff / sum(float(y.norm() ** 2) for y in b))


def attention_alone():
    """Part 1: one call at the model's shape, each variant's output and gradients against float64's."""
    print("1. One attention call, batch 4, 32 heads, 1024 queries, causal; error against naive in float64")
    for d in (80, 64):
        torch.manual_seed(0)
        q, k, v, grad = (torch.randn(4, 32, 1024, d, device=CUDA) for _ in range(4))
        inputs = [x.double().requires_grad_() for x in (q, k, v)]
        out = get_attention("naive")(*inputs, is_causal=True)
        out.backward(grad.double())
        reference = [out, *(x.grad for x in inputs)]
        naive = get_attention("naive")
        variants = {
            "naive eager": naive,
            "naive compiled": torch.compile(naive, dynamic=False),
            "sdpa": get_attention("sdpa"),
            "ours": get_attention("flash_triton"),
        }
        for name, function in variants.items():
            inputs = [x.bfloat16().requires_grad_() for x in (q, k, v)]
            with autocast_context("bf16", CUDA):
                out = function(*inputs, is_causal=True)
            out.backward(grad.bfloat16())
            got = [out, *(x.grad for x in inputs)]
            errors = ", ".join(f"{relative(g, r):.4f}" for g, r in zip(got, reference, strict=True))
            finite = all(bool(torch.isfinite(g).all()) for g in got)
            print(f"  d {d}  {name:<15} out, dq, dk, dv: {errors}  finite {finite}")
    counts = torch._dynamo.utils.counters["inductor"]
    print(f"  inductor patterns: fuse_attention {counts['fuse_attention']}, matched {counts['pattern_matcher_count']}")


def loss_and_grads(model, tokens, targets, precision, grads=True):
    """The model's loss at ``precision``, and its parameters' gradients where ``grads``."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(grads), autocast_context(precision, CUDA):
        loss = cross_entropy(model(tokens), targets)
    if grads:
        loss.backward()
    return float(loss), [p.grad for p in model.parameters()] if grads else None


def model_at_one_point(model, tokens, targets):
    """Part 2: at one set of weights, each attention's loss and gradients, compiled and eager, against
    SDPA's in fp32 (eager, as a reference that no compiler touched)."""
    print(f"2. The model, context {tokens.shape[1]}, batch 4, at its initial weights")
    use_attention(model, "sdpa")
    with torch.compiler.set_stance(EAGER):
        ref_loss, ref_grads = loss_and_grads(model, tokens, targets, "fp32")
        ref_grads = [g.clone() for g in ref_grads]
        use_attention(model, "naive")
        naive_fp32, _ = loss_and_grads(model, tokens, targets, "fp32", grads=False)
    print(f"  sdpa fp32 eager: loss {ref_loss:.5f} (the reference); naive fp32 eager: loss {naive_fp32:.5f}")
    names = [n for n, _ in model.named_parameters()]
    for attention in ("naive", "flash_triton", "sdpa"):
        use_attention(model, attention)
        for stance in ("default", EAGER):
            with torch.compiler.set_stance(stance):
                loss, grads = loss_and_grads(model, tokens, targets, "bf16")
            per = [relative(g, r) for g, r in zip(grads, ref_grads, strict=True)]
            worst = max(range(len(per)), key=per.__getitem__)
            print(
                f"  {attention:<12} bf16 {'eager' if stance == EAGER else 'compiled':<8}: loss {loss:.5f}, "
                f"gradients {relative(grads, ref_grads):.4f} from the reference "
                f"(worst {names[worst]} {per[worst]:.4f}), finite {all(bool(torch.isfinite(g).all()) for g in grads)}"
            )
    del ref_grads
    model.zero_grad(set_to_none=True)


def training(model, tokens, targets, steps=20):
    """Part 3: ``steps`` train steps of each attention from the same weights and a fresh optimizer: how
    the loss moves, and whether the weights stay finite."""
    print(f"3. {steps} train steps from the initial weights, lmperf AdamW at its default rate; loss before each")
    initial = [p.detach().clone() for p in model.parameters()]
    for attention, stance in (("flash_triton", "default"), ("naive", "default"), ("naive", EAGER), ("sdpa", "default")):
        with torch.no_grad():
            for p, w in zip(model.parameters(), initial, strict=True):
                p.copy_(w)
        use_attention(model, attention)
        optimizer = make_optimizer("lmperf", model.parameters())
        losses = []
        with torch.compiler.set_stance(stance):
            for _ in range(steps):
                optimizer.zero_grad(set_to_none=True)
                with autocast_context("bf16", CUDA):
                    loss = cross_entropy(model(tokens), targets)
                loss.backward()
                optimizer.step()
                losses.append(f"{float(loss):.3f}")
            bad = sum(int((~torch.isfinite(p)).sum()) for p in model.parameters())
        label = f"{attention} {'eager' if stance == EAGER else 'compiled'}"
        print(f"  {label:<21} {' '.join(losses)}; non-finite weights after: {bad}", flush=True)
        del optimizer


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="2.7B")
    p.add_argument("--context-length", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="train steps of each attention in part 3")
    args = p.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    attention_alone()
    model = build_model(args.size, args.context_length, CUDA)
    compile_blocks(model)
    tokens, targets = random_batch(model.cfg.vocab_size, 4, args.context_length, CUDA)
    model_at_one_point(model, tokens, targets)
    training(model, tokens, targets, args.steps)


if __name__ == "__main__":
    main()
