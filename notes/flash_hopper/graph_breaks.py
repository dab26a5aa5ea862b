# pinned: ddc9cbf2f5ce  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_gluon._as_rows
"""Graph breaks and launched cost of one compiled Transformer block, flash_triton against SDPA, and
the host time of the pieces of our call. On the H100 at 2d30e55 it showed the layout check's
storage_offset() breaking each block's graph (4.0 ms against SDPA's 2.7 ms launched fwd+bwd);
fixed in 9098f76.

Ran at: 2d30e55d9a66 (H100 80GB HBM3, as .scratch/explain.py), output: quoted in the message of
    9098f7674082, which fixed the break (not kept as a file)

    PYTHONPATH=src python notes/flash_hopper/graph_breaks.py
"""

import statistics, time, torch
from lmperf.attention import ATTENTION, flash_gluon
from lmperf.model.transformer import ModelConfig, TransformerBlock, RotaryEmbedding

cfg = ModelConfig(10000, 512, 768, 3072, 1, 12)
rope = RotaryEmbedding(cfg.d_head, 512, cfg.rope_theta, "cuda")
x = torch.randn(4, 512, 768, device="cuda", requires_grad=True)
for name in ("flash_triton", "sdpa"):
    block = TransformerBlock(cfg, rope, ATTENTION[name], "cuda")
    with torch.autocast("cuda", torch.bfloat16):
        ex = torch._dynamo.explain(block)(x)
    print(name, "graphs", ex.graph_count, "breaks", ex.graph_break_count)
    for r in ex.break_reasons[:5]:
        print("   ", str(r.reason)[:300])
    torch._dynamo.reset()
    cb = torch.compile(block, dynamic=False)

    def step():
        with torch.autocast("cuda", torch.bfloat16):
            cb(x).sum().backward()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(30):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    print(name, "launched fwd+bwd of one compiled block", round(statistics.median(ts) * 1e3, 3), "ms")
# host time of the bare call, eager
q = torch.randn(4, 12, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
from lmperf.attention.flash_triton import FlashAttentionTriton

for label, fn in (
    ("ours", lambda: FlashAttentionTriton.apply(q, q, q, True)),
    ("sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)),
):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        fn()
    host = (time.perf_counter() - t) / 200
    torch.cuda.synchronize()
    print(label, "host time per forward call (no sync)", round(host * 1e6, 1), "us")
t = time.perf_counter()
for _ in range(200):
    flash_gluon.unsupported(q, q, q)
print("unsupported()", round((time.perf_counter() - t) / 200 * 1e6, 1), "us")
o, L = torch.empty_like(q), torch.empty(4, 12, 512, device="cuda")
t = time.perf_counter()
for _ in range(200):
    [flash_gluon._as_rows(z, 64) for z in (q, q, q)]
print("3 x _as_rows", round((time.perf_counter() - t) / 200 * 1e6, 1), "us")
t = time.perf_counter()
for _ in range(200):
    flash_gluon.forward(q, q, q, o, L, True)
torch.cuda.synchronize()
print("custom op forward", round((time.perf_counter() - t) / 200 * 1e6, 1), "us")
