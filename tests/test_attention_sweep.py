from functools import partial

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from lmperf.attention import naive_attention
from lmperf.attention.accounting import naive_attention_saved_bytes, observed_saved_bytes


def test_saved_bytes_by_hand():
    parts = naive_attention_saved_bytes(batch=8, seq=1024, d=64)
    assert parts["q"] == 8 * 1024 * 64 * 4 == 2 * 2**20
    assert parts["scores"] == parts["exp"] == parts["P"] == 8 * 1024 * 1024 * 4 == 32 * 2**20
    assert parts["row max"] == parts["row sum"] == 8 * 1024 * 4
    assert sum(parts.values()) == 3 * 2 * 2**20 + 3 * 32 * 2**20 + 2 * 32 * 2**10


@pytest.mark.parametrize("batch, seq, d", [(2, 16, 8), (3, 37, 16), (1, 64, 128)])
def test_account_matches_what_autograd_saves(batch, seq, d):
    q, k, v = (torch.randn(batch, seq, d, requires_grad=True) for _ in range(3))
    observed = observed_saved_bytes(lambda *x: naive_attention(*x, is_causal=False), q, k, v)
    assert observed == sum(naive_attention_saved_bytes(batch, seq, d).values())


def test_sweep_rows_and_out_of_memory(monkeypatch):
    from lmperf.studies import attention_sweep

    calls = []

    def fake_measure(attention, batch, seq, d, steps, warmup, device):
        calls.append(seq)
        if seq >= 64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has ...")
        return {"forward_mean_ms": 1.0, "backward_mean_ms": 2.0}

    monkeypatch.setattr(attention_sweep, "measure", fake_measure)
    rows = attention_sweep.sweep(16, [32, 64, 128], False, 8, 2, 0, torch.device("cpu"))
    assert calls == [32, 64, 128]  # an OOM does not stop the sweep
    assert [r["status"] for r in rows] == ["ok", "oom", "oom"]
    assert rows[1]["note"] == "CUDA out of memory. Tried to allocate 8.00 GiB."
    assert rows[0]["observed_saved_mib"] == pytest.approx(rows[0]["computed_saved_mib"])
    assert rows[2]["computed_square_mib"] == 3 * 8 * 128 * 128 * 4 / 2**20


def test_sweep_cli_measures_eager_attention(tmp_path):
    import pandas as pd

    from lmperf.studies import attention_sweep

    out = tmp_path / "d16.csv"
    attention_sweep.main(["--d", "16", "--seq-lengths", "32,64", "--steps", "3", "--warmup", "1", "--out", str(out)])
    rows = pd.read_csv(out)
    assert list(rows["seq"]) == [32, 64] and set(rows["status"]) == {"ok"}
    assert (rows["forward_mean_ms"] > 0).all() and (rows["backward_mean_ms"] > 0).all()
    assert (rows["observed_saved_mib"] == rows["computed_saved_mib"]).all()


LENGTHS = [8 * i for i in range(1, 11)]  # more than Dynamo's default recompile limit of 8


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """No compiled code or automatic-dynamic state from other tests, none left for them, and the
    recompile limit (which compile_per_shape raises for the process) as it was."""
    torch._dynamo.reset()
    names = [n for n in ("cache_size_limit", "recompile_limit") if hasattr(torch._dynamo.config, n)]
    with torch._dynamo.config.patch({n: getattr(torch._dynamo.config, n) for n in names}):
        yield
    torch._dynamo.reset()


def calls_at_each_length(attention) -> None:
    for seq in LENGTHS:
        q = torch.randn(1, seq, 16)
        attention(q, q, q, is_causal=True)


def test_torchs_default_compile_serves_later_lengths_with_one_dynamic_graph():
    """Why the sweeps compile per shape: by default a second length makes the length dynamic, and
    that one graph serves every later length."""
    counter = CompileCounter()
    calls_at_each_length(torch.compile(naive_attention, backend=counter))
    assert counter.frame_count == 2


@pytest.mark.parametrize("study", ["attention_sweep", "flash"])
def test_the_sweeps_compile_naive_attention_for_each_length(study, monkeypatch):
    import importlib

    from lmperf.recompiles import compile_per_shape

    module, counter = importlib.import_module(f"lmperf.studies.{study}"), CompileCounter()
    monkeypatch.setattr(module, "compile_per_shape", partial(compile_per_shape, backend=counter))
    if study == "flash":
        pytest.importorskip("triton")
        compiled = module.implementations()["naive_compiled"]
        calls_at_each_length(lambda q, k, v, is_causal: compiled(q, k, v, is_causal))
    else:
        monkeypatch.setattr(module, "measure", lambda attention, batch, seq, *a: calls_at_each_length(attention) or {})
        module.sweep(16, LENGTHS[:1], True, 1, 1, 0, torch.device("cpu"))
    assert counter.frame_count == len(LENGTHS)  # one static graph per length, none run uncompiled
