"""DDP variants and the sharded optimizer on CPU with gloo, 2 processes, against single-process training."""

import functools
import time

import pandas as pd
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from lmperf import grid
from lmperf.distributed import (
    DDPBucketed,
    DDPIndividualParameters,
    ShardedOptimizer,
    make_buckets,
    run_workers,
)

WORLD = 2
STEPS = 5
BATCH = 8  # global batch; each rank trains on BATCH / WORLD of it


class ToyModel(nn.Module):
    """Three linear layers and a frozen parameter that must be left alone."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16, bias=False)
        self.fc2 = nn.Linear(16, 32)
        self.fc3 = nn.Linear(32, 5)
        self.frozen = nn.Parameter(torch.randn(5), requires_grad=False)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x))))) + self.frozen


class TiedModel(nn.Module):
    """An embedding whose weight is also the output head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.mix = nn.Linear(8, 8)
        self.head = nn.Linear(8, 20, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


MODELS = {"toy": ToyModel, "tied": TiedModel}
VARIANTS = {  # bucket layouts beyond the study's (its variants, naive to torch_ddp, are STUDIED)
    "bucketed_one": lambda m: DDPBucketed(m, bucket_size_mb=None),
    "bucketed_two": lambda m: DDPBucketed(m, bucket_size_mb=2800 / 2**20),  # 2800 bytes: two buckets for the toy model
    "bucketed_per_tensor": lambda m: DDPBucketed(m, bucket_size_mb=1e-9),
    "bucketed_bf16": lambda m: DDPBucketed(m, bucket_size_mb=2800 / 2**20, comm_dtype=torch.bfloat16),
}
# Every variant the DDP study runs, wrapped as it wraps them (local, which synchronizes nothing, aside).
STUDIED = [v for v in grid.DDP_VARIANTS if v != "local"]
# Variants that communicate in a narrower dtype than the gradients: they train like one process within
# that dtype's rounding, not to float32's.
BF16_TOLERANCE = {"rtol": 2e-2, "atol": 2e-3}
COMPRESSED = {"bucketed_bf16", *(v for v in STUDIED if v.endswith("-bf16"))}
BUCKETED = [*VARIANTS, *(v for v in STUDIED if v.startswith("bucketed-"))]  # ours: tested and studied


def batch(model_name: str):
    g = torch.Generator().manual_seed(123)
    if model_name == "toy":
        return torch.randn(BATCH, 10, generator=g), torch.randn(BATCH, 5, generator=g)
    return torch.randint(0, 20, (BATCH, 6), generator=g), torch.randint(0, 20, (BATCH, 6), generator=g)


def loss_fn(model_name, out, y):
    if model_name == "toy":
        return ((out - y) ** 2).mean()
    return nn.functional.cross_entropy(out.reshape(-1, 20), y.reshape(-1))


def train_single(model_name: str) -> dict:
    torch.manual_seed(0)
    model = MODELS[model_name]()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x, y = batch(model_name)
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(model_name, model(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _train_ddp(rank, world, results_dir):
    from lmperf.studies.ddp import wrap as study_wrap

    as_studied = {v: functools.partial(study_wrap, v, device=torch.device("cpu")) for v in STUDIED}
    for model_name in MODELS:
        for variant, wrap in {**VARIANTS, **as_studied}.items():
            torch.manual_seed(0 if rank == 0 else 99)  # other ranks start elsewhere: DDP must broadcast
            model = wrap(MODELS[model_name]())
            opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
            x, y = batch(model_name)
            shard = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
            for _ in range(STEPS):
                if hasattr(model, "on_train_batch_start"):
                    model.on_train_batch_start()
                opt.zero_grad()
                loss_fn(model_name, model(x[shard]), y[shard]).backward()
                if hasattr(model, "finish_gradient_synchronization"):  # torch's DDP synchronizes in backward
                    model.finish_gradient_synchronization()
                opt.step()
            state = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
            torch.save(state, results_dir / f"{model_name}-{variant}-rank{rank}.pt")


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory):
    results_dir = tmp_path_factory.mktemp("ddp")
    run_workers(_train_ddp, WORLD, results_dir, timeout_s=300)
    return results_dir


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("variant", [*VARIANTS, *STUDIED])
def test_ddp_matches_single_process_training(ddp_results, model_name, variant):
    expected = train_single(model_name)
    tolerance = BF16_TOLERANCE if variant in COMPRESSED else {"rtol": 1e-5, "atol": 1e-6}
    ranks = [torch.load(ddp_results / f"{model_name}-{variant}-rank{rank}.pt") for rank in range(WORLD)]
    for rank, got in enumerate(ranks):
        assert got.keys() == expected.keys()
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], **tolerance, msg=f"{variant} {name} rank {rank}")
            torch.testing.assert_close(got[name], ranks[0][name], rtol=0, atol=0)  # the ranks stay in step
    if variant in COMPRESSED:  # bf16 on the wire: further from one process than float32's tolerance
        exact = {"rtol": 1e-5, "atol": 1e-6}
        floats = [name for name in expected if expected[name].is_floating_point()]
        assert any(not torch.allclose(ranks[0][name], expected[name], **exact) for name in floats)


def test_bucket_layouts():
    model = ToyModel()
    params = [p for p in model.parameters() if p.requires_grad]
    assert [len(b) for b in make_buckets(params, None)] == [len(params)]
    per_tensor = make_buckets(params, 1e-9)
    assert [len(b) for b in per_tensor] == [1] * len(params)
    assert per_tensor[0][0] is params[-1]  # filled in reverse parameter order
    two = make_buckets(params, 2800 / 2**20)
    assert len(two) == 2 and sum(len(b) for b in two) == len(params)
    assert [len(b) for b in two] == [3, 2] and all(sum(p.numel() * 4 for p in b) <= 2800 for b in two)


class SometimesUnusedModel(ToyModel):
    """ToyModel with one more bias, added to the output only on the steps that ask for it."""

    def __init__(self):
        super().__init__()
        self.extra = nn.Parameter(torch.ones(5))

    def forward(self, x, use_extra=True):
        out = super().forward(x)
        return out + self.extra if use_extra else out


def _bucket_views(rank, world, results_dir):
    """Two steps per bucketed wrapper: the first uses every parameter, the second leaves ``extra`` out.
    Each rank trains on its own shard, so the first step's gradients differ between ranks. ``extra``
    shares a bucket with used parameters in most layouts (its region of a bucket launched at the end
    is zeroed) and is a bucket of its own in ``bucketed_per_tensor`` (a bucket backward never reached)."""
    from lmperf.studies.ddp import wrap as study_wrap

    studied = {v: functools.partial(study_wrap, v, device=torch.device("cpu")) for v in BUCKETED if v in STUDIED}
    out = {}
    for variant, wrap in {**VARIANTS, **studied}.items():
        torch.manual_seed(0)
        ddp = wrap(SometimesUnusedModel())
        opt = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=0.1)
        x, y = batch("toy")
        shard = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        views, extra = [], []
        for use_extra in (True, False):
            opt.zero_grad(set_to_none=True)  # as the study's train step does: autograd's grads are fresh
            loss_fn("toy", ddp(x[shard], use_extra=use_extra), y[shard]).backward()
            ddp.finish_gradient_synchronization()
            views.append(
                [
                    all(p.grad.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr() for p in bucket)
                    and torch.equal(torch.cat([p.grad.flatten() for p in bucket]), buffer)
                    for bucket, buffer in zip(ddp.buckets, ddp.grad_buffers)
                ]
            )
            extra.append(ddp.module.extra.grad.clone())
            opt.step()
        out[variant] = {"buckets": len(ddp.buckets), "views": views, "extra": extra}
    torch.save(out, results_dir / f"views-rank{rank}.pt")


@pytest.fixture(scope="module")
def views_results(tmp_path_factory):
    results_dir = tmp_path_factory.mktemp("views")
    run_workers(_bucket_views, WORLD, results_dir, timeout_s=120)
    return [torch.load(results_dir / f"views-rank{rank}.pt") for rank in range(WORLD)]


@pytest.mark.parametrize("variant", BUCKETED)
def test_bucketed_gradients_are_views_of_their_bucket(views_results, variant):
    """After each step every gradient lies in its bucket's buffer, in bucket order, so the all-reduce
    of the buffer is the gradients' and nothing is copied back; in fp32 and in bf16 alike."""
    for rank, out in enumerate(views_results):
        assert out[variant]["views"] == [[True] * out[variant]["buckets"]] * 2, f"rank {rank}"


@pytest.mark.parametrize("variant", BUCKETED)
def test_a_parameter_a_step_left_unused_gets_a_zero_gradient(views_results, variant):
    """Its view still holds the step before's gradient; the step that skipped it must average zeros."""
    for rank, out in enumerate(views_results):
        used, unused = out[variant]["extra"]
        assert used.abs().sum() > 0, f"rank {rank}: the first step gave extra no gradient"
        assert torch.equal(unused, torch.zeros_like(unused)), f"rank {rank}: {unused}"


def _sharded_vs_adamw(rank, world, results_dir):
    torch.manual_seed(0)
    model = ToyModel()
    reference = ToyModel()
    reference.load_state_dict(model.state_dict())
    params = [p for p in model.parameters() if p.requires_grad]
    sharded = ShardedOptimizer(params[:3], torch.optim.AdamW, lr=1e-2, weight_decay=0.1)
    sharded.add_param_group({"params": params[3:]})  # parameters added later are assigned too
    plain = torch.optim.AdamW([p for p in reference.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    x, y = batch("toy")
    for _ in range(10):
        for m, opt in ((model, sharded), (reference, plain)):
            opt.zero_grad()
            loss_fn("toy", m(x), y).backward()
            opt.step()
    local = sum(p.numel() for group in sharded.local_optimizer.param_groups for p in group["params"])
    torch.save(
        {
            "model": model.state_dict(),
            "reference": reference.state_dict(),
            "local": local,
            "total": sum(p.numel() for p in params),
        },
        results_dir / f"sharded-rank{rank}.pt",
    )


def test_sharded_optimizer_matches_adamw(tmp_path):
    run_workers(_sharded_vs_adamw, WORLD, tmp_path, timeout_s=120)
    locals_ = []
    for rank in range(WORLD):
        out = torch.load(tmp_path / f"sharded-rank{rank}.pt")
        for name, value in out["reference"].items():
            torch.testing.assert_close(out["model"][name], value, rtol=1e-7, atol=0)
        locals_.append(out["local"])
    assert sum(locals_) == out["total"]  # every parameter is stepped by exactly one rank
    assert max(locals_) - min(locals_) <= max(p.numel() for p in ToyModel().parameters())  # balanced by size


def _one_rank_hangs(rank, world):
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # waits for rank 1, which is stuck and never joins
    else:
        time.sleep(3600)


def test_a_hung_rank_times_out_instead_of_hanging():
    with pytest.raises(TimeoutError):
        run_workers(_one_rank_hangs, WORLD, timeout_s=10)


def _fails(rank, world):
    if rank == 1:
        raise ValueError("rank 1 broke")


def test_a_failing_rank_raises():
    with pytest.raises(Exception, match="rank 1 broke"):
        run_workers(_fails, WORLD, timeout_s=60)


def _dropped_wrappers_free_their_model(rank, world, results_dir):
    import gc
    import weakref

    for make in (DDPIndividualParameters, lambda m: DDPBucketed(m, bucket_size_mb=1e-9)):
        model = ToyModel()
        ddp = make(model)
        x, y = batch("toy")
        loss_fn("toy", ddp(x), y).backward()
        ddp.finish_gradient_synchronization()
        alive = weakref.ref(model)
        del model, ddp
        gc.collect()
        assert alive() is None, "a dropped DDP wrapper kept its model (and gradients) alive"


def _backward_twice(rank, world):
    ddp = DDPBucketed(ToyModel(), bucket_size_mb=None)
    x, y = batch("toy")
    loss_fn("toy", ddp(x), y).backward()
    with pytest.raises(RuntimeError, match="a second backward before finish_gradient_synchronization"):
        loss_fn("toy", ddp(x), y).backward()


def _hook_time(rank, world):
    for ddp in (DDPIndividualParameters(ToyModel()), DDPBucketed(ToyModel(), bucket_size_mb=None)):
        x, y = batch("toy")
        assert ddp.hook_seconds == 0.0
        loss_fn("toy", ddp(x), y).backward()
        ddp.finish_gradient_synchronization()
        assert ddp.hook_seconds > 0.0  # the host time the hooks spent, launching all-reduces among it


def test_our_hooks_count_the_host_time_they_spend():
    run_workers(_hook_time, WORLD, timeout_s=60)


def test_a_second_backward_before_the_sync_raises_instead_of_leaving_gradients_unsynced():
    run_workers(_backward_twice, WORLD, timeout_s=60)


def test_dropped_ddp_wrappers_free_their_model(tmp_path):
    """Gradient hooks live in C++ where the garbage collector cannot see them; they must not pin the model."""
    run_workers(_dropped_wrappers_free_their_model, WORLD, tmp_path, timeout_s=120)


def test_torchrun_starts_ranks_on_one_machine_or_one_per_node():
    from lmperf.distributed.torchrun import command

    program = ["-m", "lmperf.studies.ddp", "train"]
    single = command(4, program, env={})
    assert single[-5:] == ["--standalone", "--nproc_per_node=4", *program]
    assert command(4, program, env={"SLURM_JOB_NUM_NODES": "1"}) == single

    slurm = {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "42"}
    multi = command(4, program, env=slurm, head=lambda nodelist: {"gpu[07-08]": "gpu07"}[nodelist])
    assert multi[:3] == ["srun", "--nodes=2", "--ntasks-per-node=1"]  # one torchrun per node
    assert "--nnodes=2" in multi and "--nproc_per_node=2" in multi
    assert "--rdzv_endpoint=gpu07:29400" in multi and "--rdzv_id=42" in multi and multi[-3:] == program
    with pytest.raises(SystemExit, match="do not split evenly"):
        command(3, program, env=slurm, head=lambda nodelist: "gpu07")


@pytest.mark.parametrize("experiment", ["train", "sharding", "timeline"])
def test_a_world_size_short_of_gpus_writes_a_skipped_row(experiment, tmp_path, monkeypatch):
    """On CUDA each rank needs a GPU: four ranks where two are visible is a row saying so, not a failure
    and not a silent fall back to CPU processes."""
    from lmperf.studies import ddp as study

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    out = tmp_path / f"{experiment}-n4.csv"
    study.main([experiment, "--device", "cuda", "--size", "nano", "--global-batch", "16", "--out", str(out)])
    (row,) = pd.read_csv(out).to_dict("records")
    assert (row["study"], row["world_size"], row["status"]) == (f"ddp_{experiment}", 4, "skipped")
    assert row["note"] == "needs 4 GPUs, 2 visible" and row["backend"] == "nccl"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert study.ranks_short(study.parse_args([experiment, "--device", "cuda", "--out", str(out)]), 4) is None
    assert study.ranks_short(study.parse_args([experiment, "--device", "cpu", "--out", str(out)]), 8) is None
