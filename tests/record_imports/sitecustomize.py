"""Loaded by every Python process of a test's pipeline run (this folder is on PYTHONPATH there): at
exit, write the module run as __main__, the lmperf source files the process imported and its
arguments to $LMPERF_IMPORT_LOG/<pid>.txt, so a test can check each rule's inputs against what its
job ran, and count the processes a job started."""

import atexit
import os
import sys


def _record():
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    files = sorted(
        module.__file__
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "lmperf" and getattr(module, "__file__", None)
    )
    if spec is not None and files:
        with open(os.path.join(os.environ["LMPERF_IMPORT_LOG"], f"{os.getpid()}.txt"), "w") as f:
            f.write("\n".join([spec.name, *files, "--argv", *sys.argv[1:]]) + "\n")


if os.environ.get("LMPERF_IMPORT_LOG"):
    atexit.register(_record)
