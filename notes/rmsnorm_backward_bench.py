"""Can our RMSNorm backward reach the HBM bound at the 2.7B model's shape? (notes/ladder-power.md)

``_rmsnorm_backward`` moves 168 MB a norm at 2.7B, context 1024 (4096 rows of 2560: reads the norm's
bf16 gradient, the stream's fp32 gradient and the fp32 stream, writes the fp32 and bf16 input
gradients) in about 78 µs in the ladder's kernel table, 2.2 TB/s, where a copy runs at about 3.0.
Arms, each timed by ``triton.testing.do_bench`` (median) in turns, A B C A B C:

- ``landed``: the kernel as ``FusedNormsLM`` launches it (4 bands an SM, 16 warps);
- ``bands=N``: N bands an SM (more bands: more rows in flight; fewer: fewer weight-gradient partials);
- ``warps=N``: N warps a program;
- ``rows=R``: a copy of the kernel that takes R rows a loop iteration as one 2-D tile, so each
  program has R rows' loads in flight;
and each arm's band sum (``dw.sum(0)``) timed apart. A copy of the same bytes gives the bound.

    PYTHONPATH=src python notes/rmsnorm_backward_bench.py 3
"""

import sys

import torch
import triton
import triton.language as tl
import triton.testing

from lmperf.model.fused_rmsnorm import _rmsnorm_backward

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
device = torch.device("cuda")
rows, cols = 4 * 1024, 2560
sms = torch.cuda.get_device_properties(device).multi_processor_count


@triton.jit
def _rows_backward(DN, DH, H, W, RSTD, DX, DR, DW, n_rows, n_cols, rows_per_band, R: tl.constexpr, BLOCK: tl.constexpr):
    """_rmsnorm_backward with HAS_DH and HAS_DR, R rows an iteration."""
    band = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask_c = cols < n_cols
    w = tl.load(W + cols, mask=mask_c).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = band.to(tl.int64) * rows_per_band
    last = tl.minimum(first + rows_per_band, n_rows)
    for row0 in range(first, last, R):
        r = row0 + tl.arange(0, R)
        mask = (r[:, None] < last) & mask_c[None, :]
        at = r[:, None] * n_cols + cols[None, :]
        rstd = tl.load(RSTD + r, mask=r < last, other=0.0)
        x_hat = tl.load(H + at, mask=mask, other=0.0).to(tl.float32) * rstd[:, None]
        dn = tl.load(DN + at, mask=mask, other=0.0).to(tl.float32)
        dw += tl.sum(dn * x_hat, axis=0)
        dn_w = dn * w[None, :]
        dx = (dn_w - x_hat * (tl.sum(dn_w * x_hat, axis=1) / n_cols)[:, None]) * rstd[:, None]
        dx += tl.load(DH + at, mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + at, dx, mask=mask)
        tl.store(DR + at, dx.to(DR.dtype.element_ty), mask=mask)
    tl.store(DW + band.to(tl.int64) * n_cols + cols, dw, mask=mask_c)


torch.manual_seed(0)
dn = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
dh = torch.randn(rows, cols, device=device)
h = torch.randn(rows, cols, device=device)
w = torch.rand(cols, device=device) + 0.5
rstd = torch.rsqrt(h.pow(2).mean(-1) + 1e-5)
dx = torch.empty_like(h)
dr = torch.empty_like(dn)
bytes_moved = dn.nbytes + dh.nbytes + h.nbytes + dx.nbytes + dr.nbytes


def arm(bands_per_sm=4, warps=16, r=0):
    bands = bands_per_sm * sms
    dw = torch.empty(bands, cols, device=device)
    per = triton.cdiv(rows, bands)
    if r:
        return dw, lambda: _rows_backward[(bands,)](
            dn, dh, h, w, rstd, dx, dr, dw, rows, cols, per, R=r, BLOCK=4096, num_warps=warps
        )
    return dw, lambda: _rmsnorm_backward[(bands,)](
        dn, dh, h, w, rstd, dx, dr, dw, rows, cols, per, HAS_DH=True, HAS_DR=True, BLOCK=4096, num_warps=warps
    )


arms = {
    "landed": arm(),
    "bands=1": arm(1),
    "bands=2": arm(2),
    "bands=8": arm(8),
    "warps=8": arm(4, 8),
    "warps=8,bands=8": arm(8, 8),
    "rows=2": arm(2, 16, 2),
    "rows=2,bands=4": arm(4, 16, 2),
    "rows=4,bands=1": arm(1, 16, 4),
    "rows=4,bands=2": arm(2, 16, 4),
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
