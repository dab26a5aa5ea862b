"""One small CLI per kind of target: ``python -m lmperf.studies.<study> ... --out PATH``."""

import argparse
import atexit
import ctypes
import os
import sys

from lmperf.log import to_stderr


def run_study(main, leave_at_once: bool = True) -> None:
    """Run a study as a job: its log to stderr, ``main()``, then, where ``leave_at_once``, what was
    registered to run at exit (``atexit``: logging's flush among it), the stdio buffers flushed
    (Python's and C's, which libraries print through), and an immediate end, without the rest of
    Python's finalization.

    Why: tearing down an interpreter that imported torch takes a second or two, more after
    torch.compile, and a job holds its GPU until its process ends; the exit handlers take
    milliseconds (notes/one-allocation.md, section 16). By then every output is written and renamed
    into place (lmperf.measure.rows). What is skipped: objects' finalizers and joining non-daemon
    threads, which no study leaves running. An exception or ``SystemExit`` in ``main()`` ends the job
    as usual, with its traceback and exit status. A process whose exit something outside Python
    waits on (the profile's child under nsys, whose trace is written as the process ends) passes
    False."""
    to_stderr()
    main()
    if leave_at_once:
        atexit._run_exitfuncs()  # CPython's own call at exit: no public API runs the handlers
        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)  # C's stdio buffers, which os._exit does not flush
        os._exit(0)


def int_list(text: str, least: int = 1) -> tuple[int, ...]:
    """argparse type for comma-separated integers of at least ``least`` (positive), e.g. '128,256'."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if min(values) < least:
        kind = "positive integers" if least == 1 else f"integers of at least {least}"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
    return once(values, text)


def counts(text: str) -> tuple[int, ...]:
    """argparse type for comma-separated counts that may be 0, e.g. '0,1,2,5'."""
    return int_list(text, least=0)


def once(values: tuple, text: str) -> tuple:
    """``values`` if none is named twice: a point named twice would be measured twice and written as
    two rows of one point."""
    twice = sorted({v for v in values if values.count(v) > 1}, key=values.index)
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(map(str, twice))} named twice in {text!r}")
    return values


def choice_list(choices):
    """argparse type for a comma-separated subset of ``choices``, e.g. 'naive,sdpa'."""

    def parse(text: str) -> tuple[str, ...]:
        values = tuple(v for v in text.split(",") if v)
        unknown = [v for v in values if v not in choices]
        if unknown or not values:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown)) or 'empty list'}; choose from {', '.join(choices)}"
            )
        return once(values, text)

    return parse
