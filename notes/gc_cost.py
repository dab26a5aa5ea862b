"""What one full garbage collection costs in a measuring process, as its Python heap grows.

``lmperf.measure.free_memory`` runs ``gc.collect()`` before ``torch.cuda.empty_cache()``, and the
studies call it around every CUDA-graph capture and between the ladder's blocks. A full collection
walks every tracked Python object, and a process that has built and compiled a model holds hundreds
of thousands. This times ``gc.collect()`` (median of five) after the imports, after building a model
and its train step, and after that step has compiled (two steps, on this machine's device). For
notes/one-allocation.md.

    PYTHONPATH=src python notes/gc_cost.py --size nano --out gc.csv

Ran at: 941f10eb60ea and this script (a 2-core CPU, idle), output: logs/2026-11-28-gc-cost-941f10e-cpu.csv;
and at 16618241954a (one NVIDIA H200's host, --size small --context-length 512), output:
logs/2026-11-29-gc-cost-1661824-h200.csv
"""

import argparse
import gc
import statistics
import timeit

import pandas as pd
import torch

from lmperf.measure import resolve_device
from lmperf.model import make_optimizer
from lmperf.training import build_model, compile_blocks, make_step, random_batch


def collect_ms(stage: str) -> dict:
    """Median milliseconds of five full collections now, and how many objects the collector tracks."""
    times = []
    for _ in range(5):
        start = timeit.default_timer()
        gc.collect()
        times.append(timeit.default_timer() - start)
    return {"stage": stage, "tracked_objects": len(gc.get_objects()), "gc_collect_ms": 1e3 * statistics.median(times)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="nano")
    p.add_argument("--context-length", type=int, default=32)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = resolve_device(args.device)
    rows = [collect_ms("imports")]
    model = build_model(args.size, args.context_length, device)
    compile_blocks(model)
    tokens, targets = random_batch(model.cfg.vocab_size, 2, args.context_length, device)
    step = make_step("train_step", model, make_optimizer("lmperf", model.parameters()), tokens, targets, "fp32", device)
    rows.append(collect_ms("model and step built"))
    step()
    step()
    rows.append(collect_ms("step compiled and run twice"))
    frame = pd.DataFrame(rows).assign(size=args.size, device=device.type, torch_version=torch.__version__)
    frame.to_csv(args.out, index=False)
    print(frame.to_string(index=False))


if __name__ == "__main__":
    main()
