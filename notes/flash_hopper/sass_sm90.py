# pinned: 866acdc26808  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton's kernels by their private names
"""Compile a flash kernel for sm_90 as a real launch would specialise it: unit strides ('..d'
strides) constant 1, pointers and other ints divisible by 16.

Ran at: df15c42391aa and 866acdc26808 (CPU, sm_90 builds), output: the instruction counts quoted
    in notes/flash-hopper.md (not kept as files)
"""

import sys

sys.path.insert(0, "tests")  # compile_flash_sm90.py: the sm_90 signature helpers
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from compile_flash_sm90 import FLOATS, POINTERS
from lmperf.attention import flash_triton

TARGET = GPUTarget("cuda", 90, 32)


def build(kernel, num_warps, num_stages, **constexprs):
    fn = kernel
    while not isinstance(fn, triton.runtime.jit.JITFunction):
        fn = fn.fn
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in FLOATS:
            sig[name] = "fp32"
        elif name in POINTERS or name.startswith("desc"):
            sig[name] = POINTERS.get(name, "*bf16")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name.startswith("stride") and (name.endswith("d") or name in ("stride_ln",)):
            sig[name] = "constexpr"
            constexprs[name] = 1
        else:
            sig[name] = "i32"
            if name.startswith("stride"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(
        fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()}, attrs=attrs
    )
    return triton.compile(src, target=TARGET, options={"num_warps": num_warps, "num_stages": num_stages})


def dump(c, name):
    import glob
    import subprocess

    open(f"notes/flash_hopper/sass/{name}.cubin", "wb").write(c.asm["cubin"])
    open(f"notes/flash_hopper/sass/{name}.ptx", "w").write(c.asm["ptx"])
    b = glob.glob(".venv/lib/python3*/site-packages/triton/backends/nvidia/bin")[0]
    sass = subprocess.run(
        [f"{b}/cuobjdump", "-sass", f"notes/flash_hopper/sass/{name}.cubin"], capture_output=True, text=True
    ).stdout
    open(f"notes/flash_hopper/sass/{name}.sass", "w").write(sass)
    import collections
    import re

    ops = collections.Counter(
        re.findall(
            r"\b(MUFU\.[A-Z0-9]+|HGMMA\.[0-9x]+|F2FP[A-Z0-9.]*|FMNMX|FFMA|FADD|FMUL|FSEL|STL|LDL|LDGSTS|UTMALDG|LDG\.[A-Z0-9.]+|STS[.0-9A-Z]*|LDS[.0-9A-Z]*|LDSM[.0-9A-Z]*|BAR\.SYNC|SYNCS[.A-Z]*)",
            sass,
        )
    )
    print(name, "shared", c.metadata.shared, dict(sorted(ops.items())))


if __name__ == "__main__":
    kname, bq, bk, w, s, d, causal = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7] == "1"
    extra = dict(kv.split("=") for kv in sys.argv[8:])
    extra = {k: int(v) for k, v in extra.items()}
    c = build(
        getattr(flash_triton, kname),
        w,
        s,
        D=d,
        D0=flash_triton.head_blocks(d)[0],
        D1=flash_triton.head_blocks(d)[1],
        IS_CAUSAL=causal,
        PRECISION="tf32",
        BLOCK_Q=bq,
        BLOCK_K=bk,
        EVEN_Q=True,
        EVEN_K=True,
        **extra,
    )
    dump(c, kname)
