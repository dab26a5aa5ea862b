"""Is the top rung at the energy bound of the 700 W cap? (notes/ladder-power.md)

Ran at: 5ed0df684550 (H100 80GB HBM3), output: report/reference/h100/ladder-loss/energy.txt
Ran at: 966faedcbc7d (H100 80GB HBM3), output: notes/logs/2026-11-27-ladder_energy-parts-966faed.txt
Ran at: 4759b001415c and dc459f08c55c (H200), output: the end of
    notes/logs/2026-11-27-attention_backward_op-092440e.txt
Ran at: 6f2141800d4f (H100 80GB HBM3), output: notes/logs/2026-11-27-ladder_energy-no_rope-6f21418.txt
Ran at: 602ef6ab9c33 (H100 80GB HBM3), output: notes/logs/2026-11-27-ladder_energy-unmerged-602ef6a.txt
Ran at: 97f23d7a46de (H100 80GB HBM3), outputs:
    notes/logs/2026-11-27-ladder_energy-autotuned-97f23d7.txt and -choices.txt
Ran at: 5dcc8b1abd8d (H100 80GB HBM3), output: notes/logs/2026-11-27-ladder_energy-cublaslt-5dcc8b1.txt

Arms, each a CUDA graph of one rung's work at one ladder point, in turns (A B C A B C), each from
the initial weights, held 5 s untimed, then replayed for about 6 s while nvidia-smi samples power:

- ``fwd_bwd``: the forward and backward alone (bf16 weights, no update);
- ``adamw``: the fused AdamW alone (bf16 weights, fp32 masters), on the gradients of one real backward;
- ``step``: the rung's train step, the update run inside the backward on a side stream;
- ``gemms``: the forward and backward's matrix products alone, on real operands: every mm of one
  eager forward + backward, in order, each one run on the operands that the same product of layer
  0 (or the LM head) had. So each layer's products are layer 0's, and their FLOPs are the model's
  (checked against ``matmul_parameters``);
- ``attention``: layer 0's attention forward and backward, on its real q, k, v and output gradient,
  once per layer;
- ``fwd_bwd_unmerged``: the fwd_bwd arm with our attention's output as it was returned before
  ``merged_heads``, a (batch, heads, seq, d) view, for which inductor copies its gradient;
- ``fwd_bwd_autotuned``, ``step_autotuned``: the fwd_bwd and step arms with the blocks compiled
  under inductor's max-autotune (``AUTOTUNED``): each product's Triton templates (persistent TMA
  ones too) timed against cuBLAS, and the elementwise work around a product fused into its epilogue
  where that times faster;
- ``gemms_lt``, ``fwd_bwd_lt``, ``step_lt``: those arms captured with cuBLASLt as torch's preferred
  BLAS library (``torch.backends.cuda.preferred_blas_library``), whose heuristic may pick other
  kernels for the same products;
- ``fwd_bwd_no_rope``: the fwd_bwd arm without RoPE (q and k unrotated): not the model's
  computation, but its energy against fwd_bwd's bounds what RoPE fused into the attention kernels
  could save, and tests the kernel-time-to-joules rate of the rest (notes/ladder-power.md).

Energy per replay is the median board power times the median replay time; where pynvml is
installed, the energy counter's difference over the timed replays too. If the step's energy is about
the sum of the fwd_bwd and adamw arms', overlap cannot beat (E_fwd_bwd + E_adamw) / 700 W: the 50%
MFU target (176 ms at 2.7B) then needs less work, not a better schedule. The check can fail: a step
that costs less energy than its parts, or more, says the model is wrong. The gemms and attention
arms split the fwd_bwd arm: what is left of its energy is the work between the products (norms,
SwiGLU, RoPE, residual adds, loss), the only part that fusion can remove. That split can fail too:
products that cost more alone than the whole forward and backward.

    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 > energy.txt  # fused_norms, 3 arms
    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 fused_loss gemms attention fwd_bwd adamw step
    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 fused_loss fwd_bwd fwd_bwd_no_rope
    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 fused_loss fwd_bwd fwd_bwd_unmerged step
    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 fused_loss fwd_bwd_autotuned fwd_bwd step_autotuned step
    PYTHONPATH=src python notes/ladder_energy.py 2.7B 1024 2 fused_loss gemms_lt gemms fwd_bwd_lt fwd_bwd

In the first round, each arm also lists its kernels by category from one profiled replay, and the
fwd_bwd arms the layout copies in it.
"""

import contextlib
import sys
import unittest.mock

import torch
from held_energy import held_and_timed
from torch.utils._python_dispatch import TorchDispatchMode

from lmperf.attention import ATTENTION
from lmperf.kernels.flash_attention import FlashAttentionTriton
from lmperf.kernels.fused_cross_entropy import fused_cross_entropy
from lmperf.measure import capture_graph
from lmperf.measure.flops import step_flops
from lmperf.measure.power import nvidia_smi_id
from lmperf.model.loss import cross_entropy
from lmperf.model.transformer import RotaryEmbedding, matmul_parameters
from lmperf.studies.ladder import RUNGS, Ladder, kernel_times
from lmperf.training import make_step


def main() -> None:
    size, context, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rung_name = sys.argv[4] if len(sys.argv) > 4 else "fused_norms"
    arms = sys.argv[5:] or ["fwd_bwd", "adamw", "step"]
    TIMED_S = 6.0
    AUTOTUNED = {
        "max_autotune": True,
        "max_autotune_gemm_backends": "ATEN,TRITON",
        "triton.enable_persistent_tma_matmul": True,
    }
    PRODUCTS = {torch.ops.aten.mm.default: torch.mm, torch.ops.aten.bmm.default: torch.bmm}
    device = torch.device("cuda")
    rung = next(r for r in RUNGS if r.name == rung_name)
    ladder = Ladder(size, context, 4, device, [rung])
    layers = ladder.model.cfg.num_layers
    gpu = nvidia_smi_id(device)

    def fwd_bwd(phase=None):
        """The rung's forward + backward (its model and loss, no update); ``phase`` is make_step's."""
        loss_fn = fused_cross_entropy if rung.loss == "fused" else cross_entropy
        model = ladder.fused_norms if rung.norms == "fused" else ladder.model
        marks = {"phase": phase} if phase else {}
        return make_step(
            "forward_backward", model, None, ladder.tokens, ladder.targets, "bf16", device, loss_fn=loss_fn, **marks
        )

    class Products(TorchDispatchMode):
        """Every mm and bmm run inside, in order (op, operand shapes), with clones of the operands of
        the calls numbered in ``keep``; ``backward_at`` is the first call of the backward."""

        def __init__(self, keep=frozenset()):
            super().__init__()
            self.calls, self.keep, self.operands, self.backward_at = [], keep, {}, None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in PRODUCTS:
                if len(self.calls) in self.keep:
                    self.operands[len(self.calls)] = tuple(a.detach().clone() for a in args[:2])
                self.calls.append((func, tuple(tuple(a.shape) for a in args[:2])))
            return func(*args, **(kwargs or {}))

        def phase(self, name: str):
            """make_step's phase marks: note where the backward starts."""
            if name == "backward":
                self.backward_at = len(self.calls)
            return contextlib.nullcontext()

    def eager_pass(products=None, wrap_attention=None):
        """One eager forward + backward of the rung, inside ``products``, with layer 0's attention
        function wrapped by ``wrap_attention``; then the gradients dropped and the attention put back."""
        ladder.start(rung.name)
        block = ladder.model.layers[0].attn
        if wrap_attention:
            block.attention = wrap_attention(block.attention)
        work = fwd_bwd(products.phase if products else None)
        with torch.compiler.set_stance("force_eager"), products or contextlib.nullcontext():
            work()
        ladder.drop_grads()
        ladder.before(rung.name)

    def flops(call) -> int:
        (a, b) = call[1]
        return 2 * (a[0] if len(a) == 3 else 1) * a[-2] * a[-1] * b[-1]

    def products_arm():
        """The gemms arm's work: each product of one forward + backward on layer 0's (or the head's) operands.

        The eager pass runs f products a layer forward, the LM head's last; then the head's two
        gradients, then b a layer backward, layer 0's last. The shapes must repeat so, and add up to the
        model's matmul FLOPs (with naive attention, its T x T products too: ``step_flops``).
        """
        shapes = Products()
        eager_pass(shapes)
        n, at = len(shapes.calls), shapes.backward_at
        f, b = (at - 1) // layers, (n - at - 2) // layers
        rep = [i % f if i < at - 1 else i if i < at + 2 else n - b + (i - at - 2) % b for i in range(n)]
        repeats = all(shapes.calls[i] == shapes.calls[r] for i, r in enumerate(rep))
        if (f * layers, b * layers) != (at - 1, n - at - 2) or not repeats:
            raise SystemExit(f"unexpected products: {n} calls for {layers} layers, backward from {at}: {shapes.calls}")
        cfg, tokens = ladder.model.cfg, ladder.tokens
        naive = any(func is torch.ops.aten.bmm.default for func, _ in shapes.calls)
        want = step_flops(cfg, *tokens.shape, "train_step") if naive else 6 * matmul_parameters(cfg) * tokens.numel()
        if sum(map(flops, shapes.calls)) != want:
            raise SystemExit(f"products' FLOPs {sum(map(flops, shapes.calls))} != the model's {want}")
        kept = Products(frozenset(rep))
        eager_pass(kept)
        outs = {r: PRODUCTS[kept.calls[r][0]](*kept.operands[r]) for r in kept.operands}
        print(f"# gemms arm: {n} products ({f} a layer forward, {b} backward), {want / 1e12:.3f} TFLOP", flush=True)

        def work():
            for r in rep:
                PRODUCTS[kept.calls[r][0]](*kept.operands[r], out=outs[r])

        return work

    def attention_arm():
        """The attention arm's work: layer 0's attention forward and backward, once per layer."""
        saved = {}

        def stashing(function):
            saved["function"] = function

            def stash(q, k, v, is_causal=False):
                saved["qkv"] = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                out = function(q, k, v, is_causal=is_causal)
                out.register_hook(lambda g: saved.__setitem__("do", g.detach().clone()))
                return out

            return stash

        eager_pass(wrap_attention=stashing)
        function, (q, k, v) = saved["function"], saved["qkv"]

        def work():
            for _ in range(layers):
                torch.autograd.grad(function(q, k, v, is_causal=True), (q, k, v), saved["do"])

        return work

    def no_rope(self, x, positions=None):
        """RotaryEmbedding.forward for the fwd_bwd_no_rope arm: no rotation, no kernel."""
        return x

    def unmerged_attention(q, k, v, is_causal=False):
        """flash_triton as it was before ``merged_heads``: O returned as the (batch, heads, seq, d) view."""
        return FlashAttentionTriton.apply(q, k, v, is_causal)

    def copies(table) -> str:
        """The layout copies in one replay's kernel table: kernels named for a clone, calls and µs a replay."""
        found = table[table["kernel"].str.contains("clone")]
        return (
            "; ".join(f"{r.kernel} x{r.calls_per_step:.0f} {r.ms_per_step * 1e3:.0f} us" for r in found.itertuples())
            or "none"
        )

    def kernel_summary(table) -> str:
        """One replay's kernel table by category, then its ten longest kernels, ms a replay."""
        table = table.sort_values("ms_per_step", ascending=False)
        by_category = table.groupby("category")["ms_per_step"].sum().round(3).to_dict()
        top = "\n".join(
            f"#   {r.ms_per_step:8.3f} x{r.calls_per_step:<4.0f} {r.kernel[:100]}" for r in table.head(10).itertuples()
        )
        return f"{by_category}\n{top}"

    def compiled_anew(change, name: str):
        """Arm ``name``'s graph with the blocks compiled anew under ``change``, then dropped for the next arm."""
        torch._dynamo.reset()
        with change:
            graph = arm(name)
        torch._dynamo.reset()
        return graph

    def arm(name: str):
        """The arm's graph, from the initial weights and an empty AdamW state."""
        if name.endswith("_lt"):
            before = torch.backends.cuda.preferred_blas_library()
            torch.backends.cuda.preferred_blas_library("cublaslt")
            try:
                return arm(name.removesuffix("_lt"))
            finally:
                torch.backends.cuda.preferred_blas_library(before)
        if name.endswith("_autotuned"):
            return compiled_anew(torch._inductor.config.patch(AUTOTUNED), name.removesuffix("_autotuned"))
        if name == "fwd_bwd_unmerged":
            return compiled_anew(unittest.mock.patch.dict(ATTENTION, {"flash_triton": unmerged_attention}), "fwd_bwd")
        if name == "fwd_bwd_no_rope":
            return compiled_anew(unittest.mock.patch.object(RotaryEmbedding, "forward", no_rope), "fwd_bwd")
        if name in ("gemms", "attention"):
            work = products_arm() if name == "gemms" else attention_arm()
            return capture_graph(work, device)
        ladder.start(rung.name)
        if name == "step":
            return capture_graph(ladder.step(rung), device, after_warmup=ladder.drop_grads)
        if name == "fwd_bwd":
            return capture_graph(fwd_bwd(), device, after_warmup=ladder.drop_grads)
        fwd_bwd()()  # real gradients on the bf16 weights, for the update to read
        return capture_graph(ladder.optimizer(rung.optimizer, rung.weights).step, device)

    print(f"# {torch.cuda.get_device_name(device)}, {size}, context {context}, rung {rung.name}", flush=True)
    print("round arm replays median_ms sm_mhz power_w reasons energy_per_replay_j counter_j_per_replay", flush=True)
    for k in range(rounds):
        for name in arms:
            replay = arm(name)
            timed = held_and_timed(replay, device, 5.0, TIMED_S, 30, gpu)
            c = timed.clocks.columns("")
            print(
                k, name, timed.runs, f"{timed.median_ms:.2f}", c["sm_clock_mhz"], c["power_w"], c["clock_event_reasons"],
                f"{c['power_w'] * timed.median_ms / 1e3:.2f}", f"{timed.joules_per_run:.2f}", flush=True,
            )  # fmt: skip
            if k == 0:  # one profiled replay for both listings
                table = kernel_times(replay, device, steps=1)
                print(f"# {name} kernels: {kernel_summary(table)}", flush=True)
                if name.startswith("fwd_bwd"):
                    print(f"# {name} copies: {copies(table)}", flush=True)
            del replay
            ladder.drop_grads()
            ladder.drop_bf16()


if __name__ == "__main__":
    main()
