"""Compile the FlashAttention Triton kernels for an H100 (sm_90) on a machine without a GPU.

Run by test_flash.py in a subprocess without TRITON_INTERPRET. Float scalars are typed fp64, as
torch.compile (inductor) passes them to user Triton kernels; prints shared memory per config.
"""

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from lmperf.kernels import flash_attention, flash_attention_gluon, flash_attention_gluon_backward

TARGET = GPUTarget("cuda", 90, 32)
POINTERS = {name: "*bf16" for name in ("Q", "K", "V", "O", "dO", "dQ", "dK", "dV")} | {
    name: "*fp32" for name in ("L", "Delta", "O_part", "L_part", "dQ_acc")
}
FLOATS = {"scale", "scale_log2"}


def build(kernel, floats: str = "fp64", dtype: str = "bf16", num_stages: int = 3, **constexprs):
    """The kernel compiled for sm_90 with 4 warps: constexprs as given, pointers to dtype (fp32 for
    L, Delta and the like), float scalars typed floats, other arguments i32."""
    fn = kernel
    while not isinstance(fn, triton.runtime.jit.JITFunction):  # unwrap autotune / heuristics
        fn = fn.fn
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in FLOATS:
            signature[name] = floats
        else:
            signature[name] = POINTERS.get(name, "i32").replace("bf16", dtype)
    source = ASTSource(
        fn=fn, signature=signature, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()}
    )
    return triton.compile(source, target=TARGET, options={"num_warps": 4, "num_stages": num_stages})


def compile_for_sm90(kernel, **constexprs):
    compiled = build(kernel, **constexprs)
    print(f"{compiled.name} {constexprs} shared={compiled.metadata.shared}")


if __name__ == "__main__":
    for d in (64, 80):  # one column block; two (64 + 16, the 2.7B model's head)
        d0, d1 = flash_attention.head_blocks(d)
        common = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=True, PRECISION="tf32")
        compile_for_sm90(flash_attention._fwd_kernel, **common, BLOCK_Q=128, BLOCK_K=64, EVEN_Q=True, EVEN_K=True)
        compile_for_sm90(flash_attention._bwd_dkdv_kernel, **common, BLOCK_Q=64, BLOCK_K=128, EVEN_Q=True, EVEN_K=True)
        compile_for_sm90(flash_attention._bwd_dq_kernel, **common, BLOCK_Q=128, BLOCK_K=64, EVEN_Q=False, EVEN_K=False)
    # the Hopper forward, in Gluon: short rows (_fwd_kernel), long ones (_fwd_ws_kernel, causal and not),
    # split rows (_fwd_kernel again), d = 64 and 128
    for d, causal, splits, n in (
        (64, True, 1, 4096),
        (64, True, 1, 1024),
        (128, False, 1, 4096),
        (128, True, 1, 8192),
        (128, True, 1, 1024),
        (64, True, 4, 4096),
    ):
        compiled = flash_attention_gluon.compile_for_sm90(d, causal, splits=splits, n=n)
        where = f"d={d} n={n} causal={causal} splits={splits}"
        print(f"gluon forward {where} kernel={compiled.name} shared={compiled.metadata.shared}")
    compile_for_sm90(flash_attention_gluon._combine, BLOCK_N=128, IS_CAUSAL=True, SPLITS=4, D=64, BLOCK_M=64)
    # the Hopper backward: five products, dQ added by TMA bulk reductions; and its Delta
    for d, causal in ((64, True), (64, False), (128, True)):
        compiled = flash_attention_gluon_backward.compile_for_sm90(causal, d)
        reduces = "cp.reduce.async.bulk.tensor" in compiled.asm["ptx"]
        print(f"gluon backward d={d} causal={causal} bulk_reduce={reduces} shared={compiled.metadata.shared}")
    compile_for_sm90(flash_attention_gluon_backward._delta_kernel, D=64, BLOCK=64)
