"""Why is our attention's launched gap in the model larger than one call's?

In the third eager run of `report/reference/flash-launch/`, forward + backward and train steps of
ours were slower than SDPA's by 1.8-5.8 ms a step (151-482 us a layer), where one call's forward +
backward, timed alone, cost ours at most 122 us more (notes/flash-launch.md, "The backward's host
time, piece by piece"). This times the same forward + backward four ways, ours against SDPA, host
microseconds, in turns:

- the whole model's step (small, bf16 autocast, batch 4), as e2e launches it; per layer;
- one Transformer block alone, its attention ours or SDPA's;
- the attention call alone (as flash_backward_host.py times it);
- the attention call after another block's forward + backward (SDPA's), so that the call runs
  after as much other work as it does in the model (caches, allocator), minus that block alone.

If the block's gap matches the model's per layer and the call after a block matches it too, the
call costs more where other work ran before it; if only the block does, something else in a block
of ours does.

    PYTHONPATH=src:notes python notes/flash_model_layer.py > notes/logs/<date>-flash_model_layer.txt

Ran at: d85942971346 (NVIDIA H200, torch 2.11, Triton 3.6),
    output: notes/logs/2026-11-29-flash_model_layer-d859429-h200.txt
"""

import gc
import statistics

import torch
from flash_launch_cuts import host_us

from lmperf.attention import ATTENTION, sdpa_attention
from lmperf.training import build_model, make_step, random_batch, use_attention

NAMES = {"sdpa": "sdpa", "ours": "flash_triton"}  # as rows name them -> as the model's registry does


def table(seq: int) -> dict:
    """name -> (attention, call): each call a forward + backward of that piece with that attention."""
    device = torch.device("cuda")
    model = build_model("small", seq, device)
    tokens, targets = random_batch(model.cfg.vocab_size, 4, seq, device)
    step = make_step("forward_backward", model, None, tokens, targets, "bf16", device)
    heads, d_model = model.cfg.num_heads, model.cfg.d_model
    d = d_model // heads
    make = lambda *shape: torch.randn(*shape, device=device, dtype=torch.bfloat16)  # noqa: E731
    x, g = make(4, seq, d_model).requires_grad_(), make(4, seq, d_model)
    block, other = model.layers[0], model.layers[1]
    q, k = (make(4, heads, seq, d).requires_grad_() for _ in range(2))
    v = make(4, seq, heads, d).requires_grad_().transpose(1, 2)
    dy = make(4, seq, d_model)

    def block_fb(layer):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = layer(x)
        y.backward(g)

    def call_fb(attention):
        out = attention(q, k, v, is_causal=True).transpose(1, 2).reshape(4, seq, d_model)
        out.backward(dy)

    def after_block(attention):
        block_fb(other)
        call_fb(attention)

    rows = {}
    for name, registered in NAMES.items():
        attention = ATTENTION[registered]
        rows[f"model step, {name}"] = (registered, step)
        rows[f"one block, {name}"] = (registered, lambda: block_fb(block))
        rows[f"attention call, {name}"] = (registered, lambda attention=attention: call_fb(attention))
        rows[f"another block (SDPA) then the call, {name}"] = (
            registered,
            lambda attention=attention: after_block(attention),
        )
    rows["another block (SDPA) alone"] = ("sdpa", lambda: block_fb(other))
    return model, rows


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; small, bf16, batch 4")
    gc.collect()
    gc.disable()  # as e2e times its steps
    for seq in (256, 1024):
        model, rows = table(seq)
        times = {name: [] for name in rows}
        for round_ in range(16):  # the first round warms up and is dropped
            for name, (attention, fn) in rows.items():
                use_attention(model, attention)
                if not name.startswith("model"):  # the block before the call is SDPA's
                    model.layers[1].attn.attention = sdpa_attention
                calls = 5 if name.startswith("model") else 50
                for _ in range(3):
                    fn()
                elapsed = host_us(fn, calls)
                if round_:
                    times[name].append(elapsed)
        median = {name: statistics.median(values) for name, values in times.items()}
        print(f"\nseq {seq}: host us a call, median of 15 rounds (min-max)")
        for name, values in times.items():
            print(f"  {name:45s} {median[name]:9.1f}  ({min(values):.1f}-{max(values):.1f})")
        layers = len(model.layers)
        gaps = {
            "model step, per layer": (median["model step, ours"] - median["model step, sdpa"]) / layers,
            "one block": median["one block, ours"] - median["one block, sdpa"],
            "attention call": median["attention call, ours"] - median["attention call, sdpa"],
            "the call after another block": median["another block (SDPA) then the call, ours"]
            - median["another block (SDPA) then the call, sdpa"],
        }
        print(f"  ours minus SDPA ({layers} layers):")
        for name, gap in gaps.items():
            print(f"    {name:43s} {gap:9.1f}")


if __name__ == "__main__":
    main()
