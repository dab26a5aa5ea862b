# pinned: 602ef6ab9c33  (uses lmperf internals; run it from a checkout of that commit)
# internals: fused_rmsnorm._rmsnorm_backward
"""Can our RMSNorm backward reach the HBM bound at the 2.7B model's shape? (notes/ladder-power.md)

Ran at: 0fb059489c12 (H100 80GB HBM3, uncommitted on 2b03a9082b55), output:
    notes/logs/2026-11-27-rmsnorm_backward_bench-0fb0594.txt
Ran at: 602ef6ab9c33 (H100 80GB HBM3), output: notes/logs/2026-11-27-rmsnorm_backward_bench-602ef6a.txt

``_rmsnorm_backward`` moves 168 MB a norm at 2.7B, context 1024 (4096 rows of 2560: reads the norm's
bf16 gradient, the stream's fp32 gradient and the fp32 stream, writes the fp32 and bf16 input
gradients) in about 78 µs in the ladder's kernel table, 2.2 TB/s, where a copy runs at about 3.0.
Arms, each timed by ``triton.testing.do_bench`` (median) in turns, A B C A B C:

- ``one row, 4 bands``: the launch shape that the ladder grid ran (ab1a14aa7a61): a row an
  iteration, 4 bands an SM, 16 warps;
- ``bands=N``: N bands an SM (more bands: more rows in flight; fewer: fewer weight-gradient partials);
- ``warps=N``: N warps a program;
- ``rows=R``: R rows a loop iteration as one 2-D tile, so each program has R rows' loads in flight
  (``rows=4,bands=2`` is the launch shape ``FusedNormsLM`` now uses);
and each arm's band sum (``dw.sum(0)``) timed apart. A copy of the same bytes gives the bound.

    PYTHONPATH=src python notes/rmsnorm_backward_bench.py 3
"""

import sys

import torch
import triton
import triton.testing

from lmperf.model.fused_rmsnorm import _rmsnorm_backward

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
device = torch.device("cuda")
rows, cols = 4 * 1024, 2560
sms = torch.cuda.get_device_properties(device).multi_processor_count


torch.manual_seed(0)
dn = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
dh = torch.randn(rows, cols, device=device)
h = torch.randn(rows, cols, device=device)
w = torch.rand(cols, device=device) + 0.5
rstd = torch.rsqrt(h.pow(2).mean(-1) + 1e-5)
dx = torch.empty_like(h)
dr = torch.empty_like(dn)
bytes_moved = dn.nbytes + dh.nbytes + h.nbytes + dx.nbytes + dr.nbytes


def arm(bands_per_sm=4, warps=16, r=1):
    bands = bands_per_sm * sms
    dw = torch.empty(bands, cols, device=device)
    per = triton.cdiv(rows, bands)
    return dw, lambda: _rmsnorm_backward[(bands,)](
        dn, dh, h, w, rstd, dx, dr, dw, rows, cols, per, HAS_DH=True, HAS_DR=True, ROWS=r, BLOCK=4096, num_warps=warps
    )


arms = {
    "one row, 4 bands": arm(),
    "bands=1": arm(1),
    "bands=2": arm(2),
    "bands=8": arm(8),
    "warps=8": arm(4, 8),
    "warps=8,bands=8": arm(8, 8),
    "rows=2": arm(2, 16, 2),
    "rows=2,bands=4": arm(4, 16, 2),
    "rows=4,bands=1": arm(1, 16, 4),
    "rows=4,bands=2": arm(2, 16, 4),
    "rows=4,bands=3": arm(3, 16, 4),
    "rows=8,bands=2": arm(2, 16, 8),
    "rows=4,bands=2,warps=8": arm(2, 8, 4),
}

# the same answer first: every arm against float64
x_hat = h.double() * rstd.double()[:, None]
dn_w = dn.double() * w.double()
want_dx = (dn_w - x_hat * (dn_w * x_hat).mean(-1, keepdim=True)) * rstd.double()[:, None] + dh.double()
want_dw = (dn.double() * x_hat).sum(0)
for name, (dw, call) in arms.items():
    call()
    torch.cuda.synchronize(device) if device.type == "cuda" else None
    err_dx = ((dx.double() - want_dx).norm() / want_dx.norm()).item()
    err_dw = ((dw.double().sum(0) - want_dw).norm() / want_dw.norm()).item()
    assert err_dx < 1e-5 and err_dw < 1e-5, (name, err_dx, err_dw)
    print(f"{name:>18}: dx error {err_dx:.1e}, dw error {err_dw:.1e}", flush=True)

src = torch.empty(bytes_moved // 8, device=device)  # a copy reads and writes 4 bytes an element
dst = torch.empty_like(src)
times = {name: [] for name in arms} | {"copy (same bytes)": []}
sums = {name: [] for name in arms}
for _ in range(rounds):
    for name, (dw, call) in arms.items():
        times[name].append(triton.testing.do_bench(call, warmup=50, rep=300))
        sums[name].append(triton.testing.do_bench(lambda dw=dw: dw.sum(0), warmup=50, rep=300))
    times["copy (same bytes)"].append(triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300))

print(f"\n{torch.cuda.get_device_name(device)}, {rows} x {cols}, {bytes_moved / 1e6:.0f} MB a backward")
print(f"{'arm':>18} | {'µs, rounds':>24} | TB/s | band sum µs")
for name, ms in times.items():
    med = sorted(ms)[len(ms) // 2]
    band = f"{sorted(sums[name])[len(ms) // 2] * 1e3:.1f}" if name in sums else ""
    print(f"{name:>18} | {', '.join(f'{t * 1e3:.1f}' for t in ms):>24} | {bytes_moved / med / 1e9:.2f} | {band}")
