"""The pipeline on a real Slurm: munge, slurmctld and slurmd started on this machine (Debian's
packages, installed by .ci/run), one node with two fake GPUs (GRES files the test creates).

- a finished smoke run with four studies' jobs run again through profiles/slurm-cpu (single-process
  studies, torchrun studies with their ranks, and a GPU-only study's skipped rows): every such job
  goes through sbatch, completes, runs its command once, asks for no GPU and is charged to the
  profile's account (none guessed); the report is made again from their rows;
- profiles/slurm's requests, on the fake GPUs: GPUs where a job uses them, one task per job;
- a study that fails shows its log and its error; a job past its time limit leaves nothing behind
  and `--rerun-incomplete` finishes it.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, clone_run, copy_pipeline, dry_run_jobs, import_recorder, recorded_processes, snakemake

pytestmark = pytest.mark.slow

DAEMONS = ("munged", "slurmctld", "slurmd")
NODE = socket.gethostname().split(".")[0]


def slurm_conf(root: Path) -> str:
    """One node that says it has 16 CPUs, 250 GB and two h100 GPUs (config_overrides: slurmd believes
    the file, not the machine), so the GPU profile's requests fit; a gpu and a cpu partition on it.
    Finished jobs are logged by jobcomp/filetxt (no slurmdbd) and stay in scontrol and squeue for an hour,
    longer than the smoke grid takes (a job purged sooner has no JobState to check)."""
    return f"""\
ClusterName=lmperf-test
SlurmctldHost={NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
OverTimeLimit=0
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
NodeName={NODE} NodeAddr=127.0.0.1 CPUs=16 RealMemory=256000 Gres=gpu:h100:2 State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP
"""


# Slurm's default configuration: the Slurm plugin's job step drops SLURM_CONF from the environment of
# the srun it starts, so a configuration elsewhere is not found inside the jobs.
CONF = Path("/etc/slurm")


def start(root: Path) -> dict:
    """Start the three daemons; the environment that points Slurm's commands at them."""
    for folder in ("state", "spool", "saved-conf"):
        (root / folder).mkdir()
    for i in range(2):
        (root / f"nvidia{i}").touch()  # fake GPU device files for GRES
    CONF.mkdir(exist_ok=True)
    for name in ("slurm.conf", "gres.conf"):
        if (CONF / name).exists():
            shutil.copy2(CONF / name, root / "saved-conf" / name)  # put back by stop()
    (CONF / "slurm.conf").write_text(slurm_conf(root))
    (CONF / "gres.conf").write_text(f"NodeName={NODE} Name=gpu Type=h100 File={root}/nvidia[0-1]\n")
    env = {**os.environ, "SLURM_CONF": str(CONF / "slurm.conf")}
    subprocess.run(
        ["munged", "--force", f"--socket={root}/munge.socket", f"--pid-file={root}/munged.pid",
         f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed"],
        check=True,
    )  # fmt: skip
    subprocess.run(["slurmctld", "-f", env["SLURM_CONF"]], check=True, env=env)
    subprocess.run(["slurmd", "-f", env["SLURM_CONF"]], check=True, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env).stdout.split()
        if state and all(s == "idle" for s in state):
            return env
        time.sleep(1)
    logs = "\n".join((root / log).read_text()[-1500:] for log in ("slurmctld.log", "slurmd.log"))
    raise RuntimeError(f"the Slurm node never became idle: {state}\n{logs}")


def stop(root: Path, env: dict | None) -> list[str]:
    """Cancel what is still queued or running, stop each daemon by the PID it wrote and put /etc/slurm
    back; the names of any daemons still alive 30 s later."""
    if env is not None:
        subprocess.run(["scancel", f"--user={os.getuid()}"], env=env, check=False)
        time.sleep(6)  # KillWait is 5 s
    pids = {}
    for name in DAEMONS:
        pid_file = root / f"{name}.pid"
        if pid_file.exists():
            pids[name] = int(pid_file.read_text())
            try:
                os.kill(pids[name], signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 30
    while time.time() < deadline and any(alive(pid) for pid in pids.values()):
        time.sleep(0.5)
    for name in ("slurm.conf", "gres.conf"):
        (CONF / name).unlink(missing_ok=True)
        if (root / "saved-conf" / name).exists():
            shutil.copy2(root / "saved-conf" / name, CONF / name)
    return [name for name, pid in pids.items() if alive(pid)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = [tool for tool in (*DAEMONS, "sbatch", "squeue", "scontrol") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"Slurm is not installed here (no {', '.join(missing)}); .ci/run installs Debian's "
                    "slurmctld, slurmd, slurm-client and munge")  # fmt: skip
    if os.geteuid() != 0:
        pytest.skip("starting slurmd and munged takes root")
    root = tmp_path_factory.mktemp("slurm")
    env = None
    try:
        env = start(root)
        yield {"root": root, "env": env}
    finally:
        still_running = stop(root, env)
        assert not still_running, f"daemons still running after SIGTERM: {still_running}"


def slurm_jobs(cluster) -> dict[str, dict]:
    """Every job the cluster ran, by id: scontrol's fields (rule in Comment, NumTasks, TresPerJob)."""
    ids = re.findall(r"JobId=(\d+)", (cluster["root"] / "jobcomp.txt").read_text())
    jobs = {}
    for job_id in ids:
        shown = subprocess.run(["scontrol", "show", "job", job_id, "-o"], capture_output=True, text=True,
                               env=cluster["env"]).stdout  # fmt: skip
        jobs[job_id] = dict(re.findall(r"(\w+)=(\S*)", shown))
    return jobs


def rule_of(job: dict) -> str:
    """The rule a Slurm job ran, from the comment the executor plugin gives it (rule_<rule>_wildcards_...)."""
    return re.fullmatch(r"rule_(\w+?)(_wildcards_.*)?", job.get("Comment", "")).group(1)


def run(cluster, workdir, *args, check=True):
    """Snakemake against the test cluster, every process recording itself; status checked every 5 s
    (the plugin's 40 s suits a busy cluster, not a test that waits on each job)."""
    env = {"SLURM_CONF": cluster["env"]["SLURM_CONF"], **import_recorder(workdir)}
    return snakemake(
        workdir, *args, "--slurm-init-seconds-before-status-checks", "5", env=env, check=check, timeout=1500
    )


# Rules whose smoke jobs take seconds: a single-process study, torchrun studies (their ranks in one
# Slurm task) and a GPU-only study that writes skipped rows on a CPU. The rest of the smoke grid runs
# the same way through the same profile; running all of it again here takes as long as the smoke run.
FORCED = ("precision", "allreduce", "ddp_sharding", "flash_leaderboard")


def test_measuring_jobs_run_through_slurm_and_the_report_is_remade(cluster, smoke_run, tmp_path):
    workdir = clone_run(smoke_run, tmp_path)
    shutil.rmtree(workdir / "imports")  # the smoke run's own processes: only this run's are counted
    measuring = [j for j in dry_run_jobs(workdir, "--forcerun", *FORCED, "--config", "grid=smoke") if j["benchmark"]]
    assert {j["rule"] for j in measuring} == set(FORCED)
    before = (workdir / "report/final.md").stat().st_mtime
    # two jobs at a time: the node is this 2-core machine (the profile's 16 are for a real partition)
    proc = run(
        cluster, workdir, "--workflow-profile", "profiles/slurm-cpu", "report/final.md", "--jobs", "2",
        "--forcerun", *FORCED,
    )  # fmt: skip
    report = workdir / "report/final.md"
    assert report.read_text().startswith("# lmperf report") and report.stat().st_mtime > before
    assert "SLURM account" not in proc.stdout + proc.stderr  # the plugin guesses one where none is named

    jobs = slurm_jobs(cluster)
    assert len(jobs) == len(measuring)  # each through sbatch; aggregation, figures, report stay local
    assert sorted(map(rule_of, jobs.values())) == sorted(j["rule"] for j in measuring)
    assert {j["JobState"] for j in jobs.values()} == {"COMPLETED"}
    assert all(j["NumTasks"] == "1" and "gpu" not in j.get("TresPerJob", "") for j in jobs.values())
    # Slurm places the jobs, not the `device` count of the host that runs Snakemake: two were in flight at once
    spans = sorted((j["StartTime"], j["EndTime"]) for j in jobs.values())
    assert any(start < end for (_, end), (start, _) in zip(spans, spans[1:]))
    account = yaml.safe_load((ROOT / "profiles/slurm-cpu/config.yaml").read_text())["default-resources"][
        "slurm_account"
    ]
    assert {j["Account"] for j in jobs.values()} == {account}

    # each job's command ran once: one process per output for a study, torchrun's ranks for the rest
    started = {}
    for entry, _files, argv in recorded_processes(workdir):
        if entry.startswith("lmperf.studies.") and "--out" in argv:
            started.setdefault(argv[argv.index("--out") + 1], []).append(entry)
    for job in measuring:
        out = job["output"].split(", ")[0]
        ranks = re.search(r"--ranks (\d+)", job["shell"])
        assert len(started.get(out, [])) == (int(ranks.group(1)) if ranks else 1), out


def test_the_gpu_profile_asks_for_gpus_where_jobs_use_them(cluster, tmp_path):
    workdir = copy_pipeline(tmp_path)
    targets = {
        "results/e2e/nano/fp32-eager.csv": ("e2e", 1),
        "results/precision/layernorm.csv": ("precision", 0),
        "results/allreduce/gloo-n2.csv": ("allreduce", 0),
        "results/ddp/sharding-n2.csv": ("ddp_sharding", 2),
    }
    before = set(slurm_jobs(cluster))
    # the GPU profile as it is, on the smoke grid (the studies fall back to the CPU)
    proc = run(cluster, workdir, "--workflow-profile", "profiles/slurm", *targets, "--config", "grid=smoke")
    assert "SLURM account" not in proc.stdout + proc.stderr
    jobs = [job for job_id, job in slurm_jobs(cluster).items() if job_id not in before]
    assert len(jobs) == len(targets)
    account = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())["default-resources"]["slurm_account"]
    assert {j["Account"] for j in jobs} == {account}
    for rule, gpus in targets.values():
        (job,) = [j for j in jobs if rule_of(j) == rule]
        assert job["JobState"] == "COMPLETED" and job["NumTasks"] == "1" and job["Partition"] == "gpu"
        assert job.get("TresPerJob", "") == (f"gres:gpu:h100:{gpus}" if gpus else ""), rule


def test_the_gpu_profile_asks_for_the_full_grids_ddp_ranks():
    """Each DDP job asks Slurm for a GPU per rank, at every world size of the full grid."""
    from types import SimpleNamespace

    from lmperf.registry import rule_resources

    worlds = yaml.safe_load((ROOT / "config.yaml").read_text())["grids"]["full"]["ddp"]["world_sizes"]
    assert worlds == [2, 4]
    declared = rule_resources()
    for rule in ("ddp_train", "ddp_sharding", "ddp_timeline"):
        assert [declared[rule]["gpu"](SimpleNamespace(world=str(n))) for n in worlds] == worlds, rule
    cpu = yaml.safe_load((ROOT / "profiles/slurm-cpu/config.yaml").read_text())
    assert "gpu" not in str(cpu["default-resources"]) + str(cpu["set-resources"])


def test_a_failing_study_shows_its_log_and_error(cluster, tmp_path):
    workdir = copy_pipeline(tmp_path)
    study = workdir / "src/lmperf/studies/precision.py"
    study.write_text('raise SystemExit("lmperf test: this study fails on purpose")\n' + study.read_text())
    proc = run(cluster, workdir, "--workflow-profile", "profiles/slurm-cpu", "results/precision/layernorm.csv",
               check=False)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "logs/precision/layernorm.log" in out and "this study fails on purpose" in out
    assert not (workdir / "results/precision/layernorm.csv").exists()


def test_a_job_past_its_time_limit_leaves_nothing_and_reruns(cluster, tmp_path):
    workdir = copy_pipeline(tmp_path)
    target = "results/e2e/nano/bf16-eager.csv"  # both attentions, the smoke grid's longest e2e target
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["grids"]["smoke"]["e2e"].update(warmup_steps=10**9)  # warms up until killed
    (workdir / "slow.yaml").write_text(yaml.safe_dump(config))
    proc = run(cluster, workdir, "--workflow-profile", "profiles/slurm-cpu", target, "--configfile", "slow.yaml",
               "--set-resources", "e2e:runtime=1", check=False)  # fmt: skip
    assert proc.returncode != 0
    (job,) = [j for j in slurm_jobs(cluster).values() if j.get("JobState") == "TIMEOUT"]
    assert job["Comment"].startswith("rule_e2e_")
    out_dir = workdir / "results/e2e/nano"
    assert not out_dir.exists() or not any(out_dir.iterdir())  # not even a temporary file

    run(cluster, workdir, "--workflow-profile", "profiles/slurm-cpu", target, "--rerun-incomplete")
    assert (workdir / target).exists()
