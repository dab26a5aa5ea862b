"""Loaded by every Python process of a test's pipeline run (this folder is on PYTHONPATH there): a job
whose --out matches the glob $LMPERF_HOLD (e.g. results/e2e/*) writes its PID to a new file in
$LMPERF_HOLD_DIR and then waits until it is killed, before it does any work.

So a test cuts a run while that job runs, or before it starts, never after it finished: what the test
checks does not depend on how fast the machine is."""

import fnmatch
import os
import sys
import time


def _held() -> bool:
    pattern, argv = os.environ.get("LMPERF_HOLD"), sys.argv
    return bool(pattern) and "--out" in argv[:-1] and fnmatch.fnmatch(argv[argv.index("--out") + 1], pattern)


if _held():
    with open(os.path.join(os.environ["LMPERF_HOLD_DIR"], f"{os.getpid()}.held"), "w") as f:
        f.write(" ".join(sys.argv) + "\n")
    while True:
        time.sleep(60)
