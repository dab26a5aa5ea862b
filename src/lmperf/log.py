"""Logging for lmperf's command-line jobs.

Progress and warnings go through ``logging``, each module to its own logger
(``logging.getLogger(__name__)``); every ``python -m lmperf...`` entry point calls ``to_stderr()``
once, before its ``main()`` (a study through ``lmperf.studies.run_study``). A job's log (the rule's
``log:`` file, which takes stdout and stderr) then shows each line's time, level and module, and the
phases the job enters (``lmperf.measure.phases``), so a job that runs long shows where it is. Of a
multi-process job (torchrun's ranks) rank 0 logs progress and the others warnings only.
"""

import logging
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def to_stderr(env=os.environ) -> None:
    """Send this process's log records to stderr in ``FORMAT``: INFO and above, WARNING and above on a
    rank other than 0. The module run as ``python -m`` logs as ``__main__``; its lines carry its own
    name instead (``lmperf.gpu_slots``, not ``__main__``)."""
    level = logging.INFO if env.get("RANK", "0") == "0" else logging.WARNING
    logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr)
    main = getattr(sys.modules["__main__"], "__spec__", None)
    if main is None:  # a script run by its path: its lines stay __main__
        return

    def named(record: logging.LogRecord) -> bool:
        if record.name == "__main__":
            record.name = main.name
        return True

    for handler in logging.getLogger().handlers:
        handler.addFilter(named)
