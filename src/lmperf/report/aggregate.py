"""Concatenate per-target CSVs into one tidy table per study."""

import argparse
import logging

import pandas as pd

from lmperf.log import to_stderr
from lmperf.measure.rows import write_csv_atomic

log = logging.getLogger(__name__)


def aggregate(paths: list[str]) -> pd.DataFrame:
    frames = [pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in paths]
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("csvs", nargs="+")
    args = p.parse_args(argv)
    frame = aggregate(args.csvs)
    write_csv_atomic(frame, args.out)
    log.info(f"{len(frame)} rows from {len(args.csvs)} files -> {args.out}")


if __name__ == "__main__":
    to_stderr()
    main()
