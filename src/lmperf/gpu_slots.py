"""Run a command on GPUs of its own: `python -m lmperf.gpu_slots N -- command ...`.

Snakemake counts GPUs (the `device` resource: no more jobs run than there are GPUs) but gives no
job a GPU id (snakemake/snakemake#281). This picks them: each GPU of the machine is a lock file,
the job takes N of them with `flock` and runs with `CUDA_VISIBLE_DEVICES` set to those GPUs.

Why lock files: the kernel releases a `flock` when the last process holding the file descriptor
exits, however it exits, so a SIGKILLed job (or one whose node lost Snakemake) frees its GPUs with
no cleanup step, and a job's child processes (torchrun's ranks) hold them as long as they live. The
locks live in one directory per machine (`LMPERF_GPU_SLOTS_DIR`, default `$TMPDIR/lmperf-gpu-slots`),
so two checkouts running at once share the pool too.

The command runs as it is where there is nothing to assign: on a machine with no GPU (a CPU run,
where the `device` resource alone keeps measurements apart), and inside a Slurm job, where Slurm
already chose the GPUs.
"""

import argparse
import fcntl
import glob
import logging
import os
import shutil
import subprocess
import tempfile
import time

from lmperf.log import to_stderr

log = logging.getLogger(__name__)


def visible_gpus(env=os.environ) -> list[str]:
    """The GPU ids this machine offers, without importing torch (so building Snakemake's DAG stays fast).

    `CUDA_VISIBLE_DEVICES` narrows them as CUDA would ("" or "-1": none); else the driver's device
    files, else `nvidia-smi -L`.
    """
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = [i.strip() for i in env["CUDA_VISIBLE_DEVICES"].split(",") if i.strip()]
        return [] if ids[:1] == ["-1"] else ids
    devices = sorted(glob.glob("/dev/nvidia[0-9]*"), key=lambda path: int(path.removeprefix("/dev/nvidia")))
    if devices:
        return [path.removeprefix("/dev/nvidia") for path in devices]
    if shutil.which("nvidia-smi"):
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU")]
    return []


def slots_dir(env=os.environ) -> str:
    return env.get("LMPERF_GPU_SLOTS_DIR") or os.path.join(tempfile.gettempdir(), "lmperf-gpu-slots")


def try_take(gpus: list[str], count: int, directory: str) -> list[tuple[str, int]] | None:
    """Lock `count` of these GPUs without waiting: [(gpu, fd), ...], or None (nothing held) if too few are free.

    All or nothing, so two jobs that each need two GPUs never hold one each and wait on each other.
    """
    os.makedirs(directory, exist_ok=True)
    held = []
    for gpu in gpus:
        if len(held) == count:
            break
        fd = os.open(os.path.join(directory, f"gpu{gpu}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((gpu, fd))
    if len(held) < count:
        for _, fd in held:
            os.close(fd)
        return None
    return held


def take(gpus: list[str], count: int, directory: str, poll_seconds: float = 0.5) -> list[tuple[str, int]]:
    """Wait until `count` GPUs are free, and lock them. Snakemake starts no more jobs than there are
    GPUs, so this waits only on processes of another run (or of a killed one, still exiting)."""
    waited = False
    while (held := try_take(gpus, count, directory)) is None:
        if not waited:
            log.info(f"waiting for {count} free GPU(s) of {','.join(gpus)} ({directory})")
            waited = True
        time.sleep(poll_seconds)
    return held


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int, help="GPUs the command needs (0: none; more than the machine has: all)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    os.environ.setdefault("LMPERF_JOB_START", f"{time.time():.3f}")  # lmperf.measure.phases counts from here
    gpus = visible_gpus()
    if "SLURM_JOB_ID" not in os.environ and gpus:
        held = take(gpus, min(args.count, len(gpus)), slots_dir())
        for _, fd in held:
            os.set_inheritable(fd, True)  # the command (and its children) keep the locks until they exit
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpu for gpu, _ in held)
        # In the job's log, as "lmperf.gpu_slots: CUDA_VISIBLE_DEVICES=... at ...": which GPUs it ran
        # on, and from when (the test of parallel runs reads it).
        log.info(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']} at {time.time():.3f}")
    os.execvp(command[0], command)


if __name__ == "__main__":
    to_stderr()
    main()
