"""What does a job's process spend ending, after its last write, and what do the ways of ending cost?

A child process imports torch (and, for "compiled", calls a torch.compile'd function once), prints
the time, then ends one of three ways: as usual (Python's finalization), at once (``os._exit``), or
after running its ``atexit`` handlers (what ``lmperf.studies.run`` does). The parent reads the time
when the child has ended: the difference is the ending. CPU only; nothing of lmperf is imported.

    python notes/exit_cost.py [REPEATS]

Ran at: d7a587f (this 2-core CPU machine, while the test suite ran), output:
logs/2026-11-30-exit_cost-d7a587f-cpu.txt
"""

import subprocess
import sys
import time

CHILD = """
import atexit, os, sys, time, torch
if sys.argv[1] == "compiled":
    torch.compile(lambda x: (x * 2).sin())(torch.randn(64))
print(f"{time.time():.6f}", flush=True)
if sys.argv[2] == "at once":
    os._exit(0)
if sys.argv[2] == "exit handlers, then at once":
    atexit._run_exitfuncs()
    os._exit(0)
"""
ENDINGS = ("as usual", "at once", "exit handlers, then at once")


def ending_s(work: str, ending: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, work, ending], capture_output=True, text=True, check=True)
    return time.time() - float(out.stdout.split()[-1])


def main(repeats: int) -> None:
    print("work | ending | seconds, each run")
    for work in ("eager", "compiled"):
        for ending in ENDINGS:
            seconds = [ending_s(work, ending) for _ in range(repeats)]
            print(f"{work} | {ending} | {' '.join(f'{s:.3f}' for s in seconds)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
