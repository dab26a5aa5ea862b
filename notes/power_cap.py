"""Is the H100 power-capped under dense GEMMs? Replay CUDA graphs of 2.7B-shaped GEMMs, alone and
interleaved with memory-bound copies, for 8 s each, while nvidia-smi samples clocks and power.

Ran at: df15c42391aa (H100 80GB HBM3), output: the first table of notes/ladder-power.md (not kept as a file)
"""

import csv
import io
import statistics
import subprocess
import time

import torch


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    x = torch.randn(4096, 2560, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(10240, 2560, device="cuda", dtype=torch.bfloat16)
    a = torch.empty(100_000_000, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)

    def make(kind):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(3):
                body(kind)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            body(kind)
        return g

    def body(kind):
        for i in range(32):
            y = x @ w.t()
            if kind == "mixed" and i % 4 == 0:
                b.copy_(a)

    flop_per_gemm = 2 * 4096 * 2560 * 10240
    smi = subprocess.Popen(
        [
            "nvidia-smi",
            "--query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active",
            "--format=csv,noheader,nounits",
            "-lms",
            "100",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    marks = []
    for kind in ("gemm", "mixed", "gemm", "mixed"):
        g = make(kind)
        t0 = time.time()
        n = 0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        while time.time() - t0 < 8:
            g.replay()
            n += 1
            if n % 20 == 0:
                torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / n
        marks.append((kind, t0, time.time(), ms))
        print(
            f"{kind:>6}: {ms:.3f} ms per graph of 32 GEMMs -> {32 * flop_per_gemm / ms / 1e9:.0f} TF/s (GEMMs only)",
            flush=True,
        )
        time.sleep(2)
    smi.terminate()
    out = smi.communicate()[0]
    rows = list(csv.reader(io.StringIO(out)))
    from datetime import datetime

    for kind, t0, t1, ms in marks:
        sel = []
        for r in rows:
            try:
                ts = datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            if t0 + 1 < ts < t1:
                sel.append(r)
        clk = statistics.median(float(r[1]) for r in sel)
        pw = statistics.median(float(r[2]) for r in sel)
        reasons = sorted({r[5].strip() for r in sel})
        print(
            f"{kind:>6}: {len(sel)} samples, SM clock median {clk:.0f} MHz, power median {pw:.0f} W of {sel[0][3].strip()} W, temp {sel[-1][4].strip()} C, reasons {reasons}"
        )


if __name__ == "__main__":
    main()
