"""Compile the fused AdamW kernels for an H100 (sm_90) on a machine without a GPU, and count their
16-byte loads and stores: the one-parameter kernel as a launch specializes it (16-byte aligned
pointers, a size divisible by 16), and the list kernel, whose addresses come from its table.

Run by test_ladder.py in a subprocess without TRITON_INTERPRET. Prints one line per kernel and dtype.
"""

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import mangle_type

from lmperf.kernels import fused_adamw

TARGET = GPUTarget("cuda", 90, 32)
HYPER = mangle_type(fused_adamw.Hyper.of(dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)))


def wide_accesses(kernel, signature: dict, constexprs: dict, aligned: tuple = ()) -> tuple[int, int]:
    """The kernel's 16-byte global loads and stores in its PTX."""
    names = kernel.arg_names
    source = ASTSource(
        fn=kernel,
        signature=signature | {"hyper": HYPER} | {name: "constexpr" for name in constexprs},
        constexprs={(names.index(k),): v for k, v in constexprs.items()},
        attrs={(names.index(name),): [["tt.divisibility", 16]] for name in aligned},
    )
    ptx = triton.compile(source, target=TARGET, options={"num_warps": 4}).asm["ptx"]
    return ptx.count("ld.global.v4"), ptx.count("st.global.v4")


if __name__ == "__main__":
    for dtype, triton_type, master in (("fp32", tl.float32, False), ("bf16", tl.bfloat16, True)):
        ptr = f"*{dtype}"
        one = wide_accesses(
            fused_adamw._adamw_kernel,
            dict(p_ptr=ptr, w_ptr="*fp32", g_ptr=ptr, m_ptr="*fp32", v_ptr="*fp32", t_ptr="*fp32", n_elements="i32"),
            dict(HAS_MASTER=master, BLOCK=fused_adamw.BLOCK),
            aligned=("p_ptr", "w_ptr", "g_ptr", "m_ptr", "v_ptr", "n_elements"),
        )
        types = dict(P_TYPE=triton_type, G_TYPE=triton_type)
        listed = wide_accesses(
            fused_adamw._adamw_list_kernel,
            dict(table_ptr="*i64", n_tensors="i32"),
            dict(**types, HAS_MASTER=master, SEARCH_STEPS=7, BLOCK=fused_adamw.BLOCK),
        )
        print(f"{dtype} one={one[0]},{one[1]} list={listed[0]},{listed[1]}")
