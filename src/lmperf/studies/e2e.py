"""End-to-end benchmark of one (size, precision, compile, attention) point over context lengths.

One row per (context length, mode); one process per target, so the model is built (and compiled)
once and process start-up is paid once per target rather than once per context.

    python -m lmperf.studies.e2e --size small --context-lengths 128,256 --precision bf16 --compile \
        --warmup-steps 5 --measured-steps 10 --out results/e2e/naive/small/bf16-compiled.csv
"""

import argparse

from lmperf.attention import ATTENTION
from lmperf.measure import MODES, BenchmarkSpec, resolve_device, run_benchmark, write_rows
from lmperf.model import OPTIMIZERS, SIZES
from lmperf.studies import int_list


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", required=True, choices=list(SIZES))
    p.add_argument("--context-lengths", type=int_list, required=True, help="comma-separated, e.g. 128,256")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile each Transformer block")
    p.add_argument("--attention", choices=list(ATTENTION), default="naive")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), default="lmperf")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measured-steps", type=int, default=10)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--study", default="e2e", help="label written in the 'study' column")
    p.add_argument("--out", required=True, help="CSV to write (atomically)")
    args = p.parse_args(argv)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        p.error(f"--modes: unknown mode(s) {sorted(unknown)}; choose from {list(MODES)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    spec = BenchmarkSpec(
        size=args.size, context_lengths=args.context_lengths, batch_size=args.batch_size,
        precision=args.precision, compile=args.compile, attention=args.attention, optimizer=args.optimizer,
        warmup_steps=args.warmup_steps, measured_steps=args.measured_steps,
    )
    rows = run_benchmark(spec, modes=args.modes.split(","), device=resolve_device(args.device))
    for row in rows:
        row["study"] = args.study
    write_rows(rows, args.out)


if __name__ == "__main__":
    main()
