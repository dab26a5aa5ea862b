"""Start a study's ranks with torchrun: all on this machine, or across the nodes of a Slurm allocation.

    python -m lmperf.distributed.torchrun --ranks 2 lmperf.studies.ddp train --size xl ...

On one node (no Slurm, or a one-node allocation) this is ``torchrun --standalone
--nproc_per_node=RANKS``. In an allocation of N nodes (a cluster profile that asks for more GPUs
than a node has, with ``nodes: N``) it is one torchrun per node, started by ``srun
--ntasks-per-node=1``, RANKS/N ranks each, meeting at a c10d rendezvous on the allocation's first
node. The job's command itself still runs once: the Slurm profiles ask for one task per job.
"""

import argparse
import logging
import os
import subprocess
import sys

from lmperf.log import to_stderr

log = logging.getLogger(__name__)

RENDEZVOUS_PORT = 29400


def first_node(nodelist: str) -> str:
    """The first host of a Slurm node list ("gpu[01-04]" -> "gpu01"), as scontrol expands it."""
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return hosts.stdout.split()[0]


def command(ranks: int, program: list[str], env: dict, head=first_node) -> list[str]:
    """The command that starts ``ranks`` processes of ``program`` (``-m module args...``)."""
    nodes = int(env.get("SLURM_JOB_NUM_NODES", "1"))
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    if nodes <= 1:
        return [*torchrun, "--standalone", f"--nproc_per_node={ranks}", *program]
    if ranks % nodes:
        raise SystemExit(f"{ranks} ranks do not split evenly over the allocation's {nodes} nodes")
    return [
        "srun",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        *torchrun,
        f"--nnodes={nodes}",
        f"--nproc_per_node={ranks // nodes}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={head(env['SLURM_JOB_NODELIST'])}:{RENDEZVOUS_PORT}",
        f"--rdzv_id={env['SLURM_JOB_ID']}",
        *program,
    ]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, required=True, help="processes in all")
    p.add_argument("module", help="the module each rank runs (python -m MODULE)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = p.parse_args(argv)
    cmd = command(args.ranks, ["-m", args.module, *args.args], dict(os.environ))
    log.info(f"running: {' '.join(cmd)}")
    sys.exit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    to_stderr()
    main()
