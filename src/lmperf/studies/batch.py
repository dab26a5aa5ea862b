"""Where does the host stop mattering? The train step of one model size at one context, timed launched
and graphed (lmperf.measure.harness, as the e2e study times it) at batch 1, 2, 4, ... in turn, until a
batch does not fit: its row (status oom, the reason in its note) ends the list.

A launched step costs the host about the same at any batch, while the GPU's work grows with it, so
the host's share (launched / graphed - 1, the ``host_overhead`` column) falls as the batch grows.

    python -m lmperf.studies.batch --size small --context-length 512 --batch-sizes 1,2,4,8 \
        --precision bf16 --compile --out results/batch/small.csv
"""

import argparse

from lmperf.attention import ATTENTION
from lmperf.measure import Budget, resolve_device, write_rows
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.model import OPTIMIZERS, SIZES
from lmperf.studies import int_list, run_study
from lmperf.training import PRECISIONS


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(SIZES))
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--batch-sizes", type=int_list, required=True, help="comma-separated, timed in this order")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16")
    p.add_argument("--compile", action="store_true", help="torch.compile each Transformer block")
    p.add_argument("--attention", choices=list(ATTENTION), default="naive")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), default="lmperf")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10)
    p.add_argument("--ci-halfwidth", type=float, default=0.01)
    p.add_argument("--max-seconds", type=float, default=3.0)
    p.add_argument("--settle-seconds", type=float, default=0.0)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--out", required=True, help="CSV to write (atomically)")
    return p.parse_args(argv)


def batch_rows(args: argparse.Namespace) -> list[dict]:
    """One train-step row per batch size, in order, up to and including the first that is not ok."""
    device = resolve_device(args.device)
    budget = Budget(min_steps=args.measured_steps, rel_halfwidth=args.ci_halfwidth, max_seconds=args.max_seconds)
    rows = []
    for batch in args.batch_sizes:
        spec = BenchmarkSpec(
            size=args.size,
            context_lengths=(args.context_length,),
            batch_size=batch,
            precision=args.precision,
            compile=args.compile,
            attentions=(args.attention,),
            optimizer=args.optimizer,
            warmup_steps=args.warmup_steps,
            budget=budget,
            settle_seconds=args.settle_seconds,
        )
        (row,) = run_benchmark(spec, modes=("train_step",), device=device)
        graphed = row.get("graphed_median_ms", float("nan"))
        row.update(  # the harness's row already carries ci_halfwidth and host_bound_threshold
            study="batch",
            host_overhead=row.get("median_ms", float("nan")) / graphed - 1 if graphed == graphed else float("nan"),
        )
        rows.append(row)
        if row["status"] == "oom":  # no larger batch fits either
            break
    return rows


def main(argv=None) -> None:
    args = parse_args(argv)
    write_rows(batch_rows(args), args.out)


if __name__ == "__main__":
    run_study(main)
