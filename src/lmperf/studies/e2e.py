"""End-to-end benchmark of one (size, precision, compile) point over context lengths and attentions.

One row per (attention, context length, mode); one process per target, so the model is built (and
compiled) once, and the attention variants take turns on that one model (lmperf.measure.harness).

    python -m lmperf.studies.e2e --size small --context-lengths 128,256 --precision bf16 --compile \
        --attention naive,sdpa --warmup-steps 5 --measured-steps 10 --max-seconds 30 \
        --out results/e2e/small/bf16-compiled.csv
"""

import argparse

from lmperf.attention import ATTENTION
from lmperf.measure import Budget, resolve_device, write_rows
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.model import OPTIMIZERS, SIZES
from lmperf.studies import choice_list, counts, int_list, run_study
from lmperf.training import MODES, PRECISIONS


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(SIZES))
    p.add_argument("--context-lengths", type=int_list, required=True, help="comma-separated, e.g. 128,256")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile each Transformer block")
    p.add_argument(
        "--attention",
        type=choice_list(ATTENTION),
        default=("naive",),
        help=f"comma-separated, timed in turns on one model: {','.join(ATTENTION)}",
    )
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), default="lmperf")
    p.add_argument(
        "--modes", type=choice_list(MODES), default=MODES, help=f"comma-separated subset of {','.join(MODES)}"
    )
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument(
        "--warmup-windows",
        type=counts,
        default=(),
        help="comma-separated warm-up counts read from this one process (the warm-up study): every step timed, "
        "one row per count; needs --warmup-steps 0 and --no-graph",
    )
    p.add_argument("--measured-steps", type=int, default=10, help="at least this many, then more until the CI is tight")
    p.add_argument(
        "--ci-halfwidth", type=float, default=0.01, help="stop when the median's CI half-width is this fraction"
    )
    p.add_argument(
        "--max-seconds", type=float, default=30.0, help="time budget per point for steps past --measured-steps"
    )
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=0.0,
        help="the most seconds of untimed replays before each attention's block of replays; ends once steady",
    )
    p.add_argument(
        "--physics-slack",
        type=float,
        default=0.02,
        help="target written on the rows: the report's physics check lets a time fall by this fraction",
    )
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--study", default="e2e", help="label written in the 'study' column")
    p.add_argument("--out", required=True, help="CSV to write (atomically)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    budget = Budget(min_steps=args.measured_steps, rel_halfwidth=args.ci_halfwidth, max_seconds=args.max_seconds)
    spec = BenchmarkSpec(
        size=args.size,
        context_lengths=args.context_lengths,
        batch_size=args.batch_size,
        precision=args.precision,
        compile=args.compile,
        attentions=args.attention,
        optimizer=args.optimizer,
        warmup_steps=args.warmup_steps,
        budget=budget,
        graphed=not args.no_graph,
        settle_seconds=args.settle_seconds,
        warmup_windows=tuple(args.warmup_windows),
    )
    rows = run_benchmark(spec, modes=args.modes, device=resolve_device(args.device))
    for row in rows:
        row.update(study=args.study, physics_slack=args.physics_slack)
    write_rows(rows, args.out)


if __name__ == "__main__":
    run_study(main)
