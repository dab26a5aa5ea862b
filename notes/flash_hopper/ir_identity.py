# pinned: 2cc08729ad20  (uses lmperf internals; run it from a checkout of that commit)
# internals: flash_triton's kernels by their private names
"""Fingerprints of the portable flash kernels' sm_90 builds, to show that a refactor changed no code.

Ran at: 2cc08729ad20 (CPU, sm_90 builds), on 4f7b3d710f99's src/ and on its own, outputs:
    notes/flash_hopper/logs/2026-11-25-ir_identity-4f7b3d7.txt and -calls-packed.txt

Compiles _fwd_kernel, _bwd_dkdv_kernel and _bwd_dq_kernel for an H100 on a machine without a GPU,
at d = 64, 80 and 128, causal and not, tile-multiple lengths and edges, bf16 and fp32: 72 builds,
about 5 minutes on two cores. Per build it prints two hashes: of the TTGIR and LLVM IR with source
locations and debug metadata stripped (the code), and of the SASS (what ptxas made of it).

Compare two commits by running it on each (`PYTHONPATH=<other checkout>/src` picks the other's
lmperf) and diffing the output. Equal IR hashes mean the same code. The SASS hash can still differ
where only line numbers moved: Triton compiles with line info, and ptxas reads the PTX's DWARF call
lines, so a docstring added above a kernel can change its register allocation (seen at d = 80 when
the kernels' calls were reformatted; same instruction count, PTX equal but for DW_AT_call_line).

    .venv/bin/python notes/flash_hopper/ir_identity.py > after.txt
"""

import glob
import hashlib
import itertools
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, "tests")  # compile_flash_sm90.py: the sm_90 signature helpers
import triton

from compile_flash_sm90 import build
from lmperf.attention import flash_triton

CUOBJDUMP = glob.glob(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))[0]


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def code_of(compiled) -> str:
    """TTGIR and LLVM IR without locations or debug metadata."""
    text = ""
    for stage in ("ttgir", "llir"):
        lines = re.sub(r"loc\([^\n]*", "", compiled.asm[stage]).splitlines()
        text += re.sub(r", !dbg ![0-9]+", "", "\n".join(x for x in lines if not re.match(r"\s*(#loc|!)", x)))
    return text


def sass_of(compiled) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        sass = subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return "\n".join(x for x in sass.splitlines() if x.strip().startswith(("/*", "[")) or "*/" in x)


if __name__ == "__main__":
    grid = itertools.product((64, 80, 128), (True, False), (True, False), (("bf16", "tf32"), ("fp32", "ieee")))
    for d, causal, even, (dtype, precision) in grid:
        d0, d1 = flash_triton.head_blocks(d)
        flags = dict(D=d, D0=d0, D1=d1, IS_CAUSAL=causal, PRECISION=precision, EVEN_Q=even, EVEN_K=even)
        big = 1 if dtype == "fp32" else 2  # fp32 runs the small tiles KERNELS tunes it over
        for name, kernel, stages, tiles in (
            ("fwd", flash_triton._fwd_kernel, 3, (64 * big, 32 * big)),
            ("dkdv", flash_triton._bwd_dkdv_kernel, 2, (32, 64 * big)),
            ("dq", flash_triton._bwd_dq_kernel, 3, (64 * big, 32 * big)),
        ):
            compiled = build(kernel, "fp32", dtype, stages, **flags, BLOCK_Q=tiles[0], BLOCK_K=tiles[1])
            where = f"{name} {dtype} d{d} {'causal' if causal else 'full'} {'even' if even else 'edge'}"
            print(f"{where:32} ir {digest(code_of(compiled))} sass {digest(sass_of(compiled))}", flush=True)
