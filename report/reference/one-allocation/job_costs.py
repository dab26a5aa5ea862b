"""The last measured wall time of each full-grid job, from the reference slices' benchmark files and
this slice's own runs, named as the pipeline names the job today (benchmarks/<study>/...tsv); the
fp32 e2e jobs scaled by the cut measured in cuts/e2e, the flash sweep's and the timed ladder's jobs
less what the cut of cuts/gc saved, and the profile's per-point jobs joined into one per size as
cuts/profile measured; then the jobs measured after the cuts (head-8f96bdc, head-507f3e6,
head-7bc5294, head-5cda776), the DDP jobs of ../ddp-ranks and the flash jobs of ../flash-sweep-rounds
replace their earlier costs, the profile jobs are scaled by the cut of cuts/ranges or measured after it
(head-dd2cc4a), and the e2e jobs are charged the holds that taking turns added (head-d3fc0d3); then
the jobs measured after holds began to end on the power probe (cuts/probe, head-a41e378), and the
warm-up jobs, one process per (mode, process) since section 11, charged their count-5 jobs; then
the jobs of section 12 (head-932eda2, head-d4346d8) and of section 13 (head-d3ed14d); last, the jobs
of section 14 (head-6e3f832), of section 16 (head-7ae2b01), of section 17 (head-70a4026), of
section 18 (head-eeba841) and of section 19 (head-60b6739).

Run from the project's root: job_costs.py SLICE [OUT] [--without RUN] ... (OUT defaults to
SLICE/job_costs.csv). Each --without leaves out one run that is charged as measured (a folder of
SLICE named in a charge_as_measured call below; any other name is an error). Leaving out the last
run, or the last few, gives the costs as they were before them, which a README section compares with:
job_costs.py SLICE /tmp/before.csv --without head-60b6739."""

import argparse
import re
from pathlib import Path

import pandas as pd

H100 = Path("report/reference/h100")
parser = argparse.ArgumentParser()
parser.add_argument("slice", type=Path)  # the slice folder: its one-job-each/benchmarks hold this commit's runs
parser.add_argument("out", type=Path, nargs="?")
parser.add_argument("--without", action="append", default=[], metavar="RUN")
args = parser.parse_args()
here, out = args.slice, args.out or args.slice / "job_costs.csv"
rows = []
charged_runs = set()  # the runs charge_as_measured saw: --without may name only these


def wall(tsv):
    return float(pd.read_csv(tsv, sep="\t")["s"].iloc[-1])


def add(job, tsv, source):
    rows.append({"job": job, "wall_s": wall(tsv), "source": source})


def charge_as_measured(costs, runs):
    """Each job of each (run, source) in ``runs`` charged its measured wall time, named by its source
    (but the runs --without names)."""
    for run, source in runs:
        charged_runs.add(run)
        if run in args.without:
            continue
        for tsv in sorted((here / run / "benchmarks").rglob("*.tsv")):
            job = costs["job"] == "benchmarks/" + str(tsv.relative_to(here / run / "benchmarks"))
            costs.loc[job, ["wall_s", "source"]] = wall(tsv), source


for tsv in sorted((H100 / "e2e-one-commit/benchmarks").glob("*.tsv")) + sorted(
    (H100 / "graph-capture/benchmarks").glob("e2e-*.tsv")
):
    size, prec, comp = re.match(r"e2e-(.+)-(fp32|bf16)-(eager|compiled)", tsv.stem).groups()
    add(f"benchmarks/e2e/{size}/{prec}-{comp}.tsv", tsv, str(tsv.parent.parent.name))
for tsv in sorted((H100 / "graph-capture/benchmarks/warmup").rglob("*.tsv")):
    add("benchmarks/" + str(tsv.relative_to(H100 / "graph-capture/benchmarks")), tsv, "graph-capture")
for tsv in sorted((H100 / "profile-one-commit/benchmarks").glob("profile-*.tsv")):
    size, rest = re.match(r"profile-(small|medium|large|xl|2\.7B)-(.+)", tsv.stem).groups()
    add(f"benchmarks/profile/{size}/{rest}.tsv", tsv, "profile-one-commit")
for tsv in sorted((H100 / "ladder-grid-ab1a14a/benchmarks").glob("ladder-*.tsv")):
    size, ctx, timed = re.match(r"ladder-(.+)-ctx(\d+)(-timed)?$", tsv.stem).groups()
    add(f"benchmarks/ladder/{size}/ctx{ctx}{timed or ''}.tsv", tsv, "ladder-grid-ab1a14a")
for tsv in sorted((H100 / "flash-sweep-ws/benchmarks").glob("*.tsv")):
    name = "leaderboard" if tsv.stem == "leaderboard" else f"sweep/{tsv.stem}"
    add(f"benchmarks/flash/{name}.tsv", tsv, "flash-sweep-ws")
for tsv in sorted((H100 / "allreduce-x4/benchmarks").glob("*.tsv")):
    if tsv.stem != "nccl-n6":  # on four GPUs it wrote a skipped row ("needs 6 GPUs, 4 visible"): no cost
        add(f"benchmarks/allreduce/{tsv.name}", tsv, "allreduce-x4")
for tsv in sorted((H100 / "memory-ddp/benchmarks/memory").glob("*.tsv")):
    add(f"benchmarks/memory/{tsv.name}", tsv, "memory-ddp")
for tsv in sorted((H100 / "memory-ddp/benchmarks/ddp").glob("*.tsv")):  # two ranks, before world sizes were a list
    kind, batch = re.match(r"(train|sharding|timeline)(?:-b(\d+))?$", tsv.stem).groups()
    add(f"benchmarks/ddp/{kind}-n2{'-b' + batch if batch else ''}.tsv", tsv, "memory-ddp")
for tsv in sorted((H100 / "launch-check/benchmarks/precision").glob("*.tsv")):
    add(f"benchmarks/precision/{tsv.name}", tsv, "launch-check")
for tsv in sorted((H100 / "batch/benchmarks").glob("*.tsv")):
    add(f"benchmarks/batch/{tsv.name}", tsv, "batch")
for tsv in sorted((here / "one-job-each/benchmarks").rglob("*.tsv")):
    add("benchmarks/" + str(tsv.relative_to(here / "one-job-each/benchmarks")), tsv, "one-job-each")
costs = (
    pd.DataFrame(rows)
    .groupby(["job", "source"], sort=False, as_index=False)["wall_s"]
    .sum()
    .drop_duplicates("job", keep="last")
)
# The cut measured before and after (cuts/e2e): an fp32 e2e job times naive attention alone and holds
# each point only until it is steady. Every fp32 e2e job measured before it is charged its cost times
# the after / before ratio of the one such job measured both ways: an estimate, named in `source`.
cut = wall(here / "cuts/e2e/after/benchmarks/e2e/small/fp32-compiled.tsv") / wall(
    here / "cuts/e2e/before/benchmarks/e2e/small/fp32-compiled.tsv"
)
fp32 = costs["job"].str.match(r"benchmarks/e2e/[^/]+/fp32-")
costs.loc[fp32, "wall_s"] *= cut
costs.loc[fp32, "source"] += f" x {cut:.3f} (cuts/e2e)"


# The cut measured before and after (cuts/gc): capture and dropped gradients return cached blocks with
# no full garbage collection. Its jobs ran outside the pipeline, so their wall time is the last line of
# each job.log (/usr/bin/time). A flash sweep job saves the subset's seconds per graph, charged for
# the graphs a full target makes (the d64 target of one-job-each/, for every target); a timed ladder job
# saves what the warm pair saved (3-new against 4-old; 1-new ran with cold compile caches). Estimates,
# named in `source`; the checked ladder jobs are charged as measured.
def job_wall(run: str) -> float:
    """A job run by hand under /usr/bin/time: its log's last line is "<seconds> s wall"."""
    return float((here / "cuts" / run / "job.log").read_text().split()[-3])


def graphs(results: Path) -> int:
    return int(sum(pd.read_csv(f)["graphed_median_ms"].notna().sum() for f in results.rglob("sweep/*.csv")))


pairs = [("gc/flash/1-old", "gc/flash/2-new"), ("gc/flash/3-old", "gc/flash/4-new")]
per_graph = sum(job_wall(a) - job_wall(b) for a, b in pairs) / len(pairs) / graphs(here / "cuts/gc/flash/2-new/rows")
saved = {
    r"benchmarks/flash/sweep/": per_graph * graphs(here / "one-job-each/rows"),
    r"benchmarks/ladder/[^/]+/ctx\d+-timed": job_wall("gc/ladder/4-old") - job_wall("gc/ladder/3-new"),
}
for pattern, seconds in saved.items():
    jobs = costs["job"].str.match(pattern)
    costs.loc[jobs, "wall_s"] -= seconds
    costs.loc[jobs, "source"] += f" - {seconds:.1f} s (cuts/gc)"


# The cut of cuts/profile: one profile job per size, its points in one process and one nsys session,
# where there was one job per point. Small is charged its job measured after the cut. Each other
# size is charged the sum of its per-point jobs less what small's points saved for each point past
# the first: (the sum of small's per-point jobs - its one job after the cut) / (points - 1). An
# estimate, named in `source`.
def per_size(job: str) -> str:
    return re.sub(r"/(?:forward|train_step)-ctx\d+\.tsv$", ".tsv", job)


points = costs[costs["job"].str.match(r"benchmarks/profile/[^/]+/")]
sizes = points.groupby(points["job"].map(per_size)).agg(wall_s=("wall_s", "sum"), points=("wall_s", "size"))
after = job_wall("profile/after")
small = "benchmarks/profile/small.tsv"
per_point = (sizes.loc[small, "wall_s"] - after) / (sizes.loc[small, "points"] - 1)
sizes["source"] = f"profile-one-commit, per-point jobs summed - {per_point:.1f} s a point past the first (cuts/profile)"
sizes["wall_s"] -= per_point * (sizes["points"] - 1)
sizes.loc[small, ["wall_s", "source"]] = after, "cuts/profile"
costs = pd.concat(
    [costs[~costs["job"].isin(points["job"])], sizes.reset_index(names="job")[["job", "source", "wall_s"]]],
    ignore_index=True,
)

# Jobs measured again after the cuts, at 8f96bdc on one H200 (head-8f96bdc/), the 4-rank DDP jobs
# of ../ddp-ranks/ (292df6d, H200s), the flash and attention jobs of ../flash-sweep-rounds/
# (118e653, H200s, the sweep in rounds), two e2e jobs at 507f3e6 (head-507f3e6/, H200s, replays
# in turns), two flash sweep and three attention jobs at 7bc5294 (head-7bc5294/, H200s) and four flash
# sweep, two attention, one precision and two profile jobs at 5cda776 (head-5cda776/, H200s): these
# replace every earlier cost of the same job. The 2.7B ladder job at context 1024 was stopped by its
# call's limit after 540 s (snakemake-2.log): that is charged, a lower bound.
later = [
    {"job": "benchmarks/" + str(tsv.relative_to(base)), "wall_s": wall(tsv), "source": source}
    for base, source in (
        (here / "head-8f96bdc/benchmarks", "head-8f96bdc"),
        (here.parent / "ddp-ranks/benchmarks", "ddp-ranks"),
        (here.parent / "flash-sweep-rounds/benchmarks", "flash-sweep-rounds"),
        (here / "head-507f3e6/benchmarks", "head-507f3e6"),
        (here / "head-7bc5294/benchmarks", "head-7bc5294"),
        (here / "head-5cda776/benchmarks", "head-5cda776"),
    )
    for tsv in sorted(base.rglob("*.tsv"))
    if source != "ddp-ranks" or "-n4" in tsv.name  # its 2-rank job ran narrowed; memory-ddp's did not
]
later.append(
    {
        "job": "benchmarks/ladder/2.7B/ctx1024-timed.tsv",
        "wall_s": 540.0,
        "source": "head-8f96bdc, stopped at 540 s: a lower bound",
    }
)
costs = pd.concat([costs, pd.DataFrame(later)], ignore_index=True).drop_duplicates("job", keep="last")


# The cut of cuts/ranges: nsys without a range per PyTorch operator. The large job was run both ways
# by hand, one after the other (/usr/bin/time in each side's time.txt): it is charged as measured
# without, and every other profile job its last cost times the without / with ratio. An estimate,
# named in `source`.
def timed_wall(side: str) -> float:
    return float((here / "cuts/ranges" / side / "time.txt").read_text().split()[0])


ranges_cut = timed_wall("without") / timed_wall("with")
profile = costs["job"].str.match(r"benchmarks/profile/")
costs.loc[profile, "wall_s"] *= ranges_cut
costs.loc[profile, "source"] += f" x {ranges_cut:.3f} (cuts/ranges)"
large = costs["job"] == "benchmarks/profile/large.tsv"
costs.loc[large, ["wall_s", "source"]] = timed_wall("without"), "cuts/ranges"
# The profile jobs at xl and 2.7B measured after that cut, at dd2cc4a through the pipeline (head-dd2cc4a/,
# two H200s): charged as measured.
charge_as_measured(costs, [("head-dd2cc4a", "head-dd2cc4a")])


# Since d3fc0d3 e2e's attention variants are replayed in turns of held blocks (e2e-power/): a point
# holds each variant once a turn, two turns, where it held them all once. head-d3fc0d3 measured small
# bf16-eager after the change; every other e2e job is charged, on top of its last cost, what each added
# hold cost there (its wall time less head-8f96bdc's, over the 60 holds it added: 12 points x (3
# variants x 2 turns - 1)), times its size's mean hold against small's (head-8f96bdc's rows: small's for
# small and medium, 2.7B's for large, xl and 2.7B). An estimate, named in `source`; at large, xl and
# 2.7B a lower bound, as 2.7B's holds there ran on weights that compiled naive attention had made NaN.
def mean_hold(size: str) -> float:
    rows = pd.concat(pd.read_csv(f) for f in sorted((here / "head-8f96bdc/rows/e2e" / size).glob("*.csv")))
    return rows.drop_duplicates(["compile", "context_length", "mode"])["graphed_settle_s"].mean()


measured = "benchmarks/e2e/small/bf16-eager.tsv"
own_holds = ("head-507f3e6", "head-7bc5294")  # measured after d3fc0d3: their holds are in their time
per_hold = (wall(here / "head-d3fc0d3" / measured) - wall(here / "head-8f96bdc" / measured)) / 60
holds = {"small": mean_hold("small"), "2.7B": mean_hold("2.7B")}
for i, row in costs[costs["job"].str.match(r"benchmarks/e2e/")].iterrows():
    size, precision = re.match(r"benchmarks/e2e/([^/]+)/(fp32|bf16)-", row["job"]).groups()
    if row["job"] == measured:
        costs.loc[i, ["wall_s", "source"]] = wall(here / "head-d3fc0d3" / measured), "head-d3fc0d3"
        continue
    if row["source"] in own_holds:
        continue
    added = 12 * ((3 if precision == "bf16" else 1) * 2 - 1)
    scale = holds["small" if size in ("small", "medium") else "2.7B"] / holds["small"]
    costs.loc[i, "wall_s"] += added * per_hold * scale
    bound = "" if size in ("small", "medium") else ", a lower bound"
    costs.loc[i, "source"] += f" + {added} holds x {per_hold * scale:.2f} s (head-d3fc0d3{bound})"
# Costs measured under other settings than the full grid's, charged as measured and named: ddp-ranks
# ran at most 12 steps and 6 s a comparison (the grid: 20 and 20 s) and six timeline variants (the
# grid: two); the 2-rank sharding and timeline jobs ran at global batch 4 (the grid's smallest is now
# 16); the 2.7B checks at context 1024 ran on an H100, where the fp32 rungs ran out of memory (on a
# larger GPU they run).
named = {
    r"benchmarks/ddp/train-n4-b16": "; narrowed: 12 steps, 6 s a comparison (a lower bound)",
    r"benchmarks/ddp/timeline-n4": "; six variants where the grid times two",
    r"benchmarks/ddp/(sharding|timeline)-n2": "; at global batch 4 (a lower bound)",
    r"benchmarks/ladder/2\.7B/ctx1024\.tsv": "; fp32 rungs out of memory on the H100 (a lower bound)",
}
for pattern, why in named.items():
    costs.loc[costs["job"].str.match(pattern), "source"] += why
# Last, the jobs measured since holds end on the power probe (section 10), through the pipeline on two
# H200s at the grid's settings: e2e small and medium bf16-eager at 4c68dbe (cuts/probe/with/), and
# seven e2e and the 2-rank sharding and timeline jobs at a41e378 (head-a41e378/, the same src/): charged
# as measured, their holds in their time, replacing the estimates and lower bounds above.
charge_as_measured(costs, [("cuts/probe/with", "cuts/probe"), ("head-a41e378", "head-a41e378")])
# The warm-up study runs one process per (size, mode, process) since its counts are read from one
# process's steps (section 11): that process runs what the count-5 job of the same process ran, five
# steps and then the measured ones, each timed. So each is charged that job's cost, named in `source`,
# and the per-count jobs, which no grid runs now, are dropped.
per_count = costs["job"].str.extract(r"^(benchmarks/warmup/.+/)w(\d+)-p(\d+)\.tsv$")
five = per_count[1] == "5"
one_process = costs[five].assign(
    job=per_count[0][five] + "p" + per_count[2][five] + ".tsv",
    source=costs.loc[five, "source"] + ": its count-5 job, the same steps",
)
costs = pd.concat([costs[per_count[0].isna()], one_process], ignore_index=True)
# Then the jobs measured at 932eda2 (head-932eda2/: e2e 2.7B bf16-compiled, two warm-up jobs) and at
# d4346d8 (head-d4346d8/: e2e fp32-eager at large, xl and 2.7B, seven warm-up jobs), through the
# pipeline on one H200, one job at a time (section 12): charged as measured, replacing the scaled costs
# and the count-5 charges. Last, the jobs measured at d3ed14d (head-d3ed14d/: e2e 2.7B bf16-compiled
# again, the last warm-up job, and six ladder jobs at small and 2.7B), the same way (section 13):
# charged as measured, replacing 932eda2's e2e job (which restored broken weights four times), the
# last count-5 charge, and the ladder's costs of ab1a14a (H100) and 8f96bdc (H200). Then the jobs
# measured at 6e3f832 (head-6e3f832/: the eight flash sweep jobs without the tiled PyTorch attention,
# the ladder's two small jobs at context 512, and the 2-rank DDP train and timeline jobs), through the
# pipeline on two H200s, one-GPU jobs side by side (section 14): charged as measured. Then the jobs
# measured at 7ae2b01 (head-7ae2b01/: the eight flash sweep jobs, the leaderboard and three e2e jobs
# with an autotuned kernel's configs compiled side by side), the same way (section 16). Last, the jobs
# measured at 70a4026 (head-70a4026/: e2e xl and 2.7B bf16-compiled, e2e small bf16-eager and the
# flash sweep at bf16, d = 64), through the pipeline on one H200 at a time, one job at a time (section 17);
# then the jobs measured at eeba841 (head-eeba841/: the eight flash sweep jobs and two attention jobs,
# compiled naive attention compiled for each length), the same way (section 18); last, the jobs measured
# at 60b6739 (head-60b6739/: the attention, profile, memory, precision, batch and warm-up jobs charged
# from older commits or scaled, and two e2e jobs), the same way (section 19).
charge_as_measured(
    costs,
    [
        ("head-932eda2", "head-932eda2"),
        ("head-d4346d8", "head-d4346d8"),
        ("head-d3ed14d", "head-d3ed14d"),
        ("head-6e3f832", "head-6e3f832"),
        ("head-7ae2b01", "head-7ae2b01"),
        ("head-70a4026", "head-70a4026"),
        ("head-eeba841", "head-eeba841"),
        ("head-60b6739", "head-60b6739"),
    ],
)
unknown = sorted(set(args.without) - charged_runs)
if unknown:
    parser.error(f"--without {', '.join(unknown)}: not a run charged as measured ({', '.join(sorted(charged_runs))})")
costs.to_csv(out, index=False)
print(costs.groupby("source").agg(jobs=("job", "size"), minutes=("wall_s", lambda s: s.sum() / 60)))
