"""Loaded by every Python process of a test's pipeline run (this folder is on PYTHONPATH there): at
exit, write the module run as __main__, the lmperf source files the process imported and its
arguments to a new file $LMPERF_IMPORT_LOG/<pid>-<random>.txt, so a test can check each rule's inputs
against what its job ran, and count the processes a job started. The name is never reused: CI's
machine wraps its PIDs (pid_max 32768) within one run of the suite, and a later process with the same
PID overwrote an earlier one's record."""

import atexit
import os
import sys
import tempfile


def _record():
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    files = sorted(
        module.__file__
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "lmperf" and getattr(module, "__file__", None)
    )
    if spec is not None and files:
        fd, _ = tempfile.mkstemp(".txt", f"{os.getpid()}-", os.environ["LMPERF_IMPORT_LOG"])
        with os.fdopen(fd, "w") as f:
            f.write("\n".join([spec.name, *files, "--argv", *sys.argv[1:]]) + "\n")


if os.environ.get("LMPERF_IMPORT_LOG"):
    atexit.register(_record)
