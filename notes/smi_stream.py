"""When do nvidia-smi's samples reach a process that reads its pipe?

Question: a hold's power probe (lmperf.measure.power.Probe) starts nvidia-smi, lets it sample for
PROBE_S, stops it and reads its output. How long after the start does the first sample arrive, and
do the lines arrive as they are sampled (so a probe could read them while nvidia-smi runs) or only
when it exits? Prints, for a few starts, each line's arrival time after Popen.

    python notes/smi_stream.py [--starts 5] [--seconds 0.6]

Ran at: 70a4026 with this script uncommitted (NVIDIA H200), output: logs/2026-12-01-smi_stream-h200.txt
"""

import argparse
import os
import selectors
import shutil
import subprocess
import time

from lmperf.measure.power import PROBE, PROBE_INTERVAL_MS


def one_start(seconds: float) -> list[tuple[float, str]]:
    """Arrival times (s after Popen) of nvidia-smi's lines while it samples for ``seconds``."""
    query = [f"--query-gpu={','.join(PROBE)}", "--format=csv,noheader,nounits", "-lms", str(PROBE_INTERVAL_MS)]
    begun = time.perf_counter()
    process = subprocess.Popen([shutil.which("nvidia-smi"), "-i", "0", *query], stdout=subprocess.PIPE)
    os.set_blocking(process.stdout.fileno(), False)
    selector, lines, pending = selectors.DefaultSelector(), [], b""
    selector.register(process.stdout, selectors.EVENT_READ)
    while time.perf_counter() - begun < seconds:
        for _ in selector.select(timeout=0.005):
            chunk = process.stdout.read() or b""
            pending += chunk
            *done, pending = pending.split(b"\n")
            lines += [(time.perf_counter() - begun, line.decode()) for line in done]
    process.terminate()
    os.set_blocking(process.stdout.fileno(), True)
    rest = process.communicate()[0]
    lines += [(time.perf_counter() - begun, f"after exit: {line.decode()}") for line in (pending + rest).splitlines()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.6)
    args = parser.parse_args()
    for start in range(args.starts):
        lines = one_start(args.seconds)
        print(f"start {start}: {len(lines)} lines")
        for at, line in lines:
            print(f"  {at * 1e3:7.1f} ms  {line}")


if __name__ == "__main__":
    main()
