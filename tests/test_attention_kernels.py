"""Rows and the report name the attention kernels that ran: our FlashAttention (FlashAttentionTriton)
runs its Triton kernels, and on an sm_90 GPU hands a pass to the Gluon kernels where they take the
shape. Without a GPU the dispatch is checked by giving it a compute capability."""

import re
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from lmperf.attention import FlashAttentionTriton, attention_kernel, attention_tiles, forget_kernels
from lmperf.kernels import flash_attention, flash_attention_gluon_backward
from lmperf.kernels.flash_attention import backward_kernel, forward_kernel
from lmperf.measure import Budget
from lmperf.measure.harness import BenchmarkSpec, run_benchmark
from lmperf.report import flash_section
from lmperf.report.attention_kernels import kernels_sentence

HOPPER, AMPERE = (9, 0), (8, 0)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def Plan(kernel: str) -> SimpleNamespace:
    """A stand-in for a pass's plan as RAN keeps it: only the kernel it runs."""
    return SimpleNamespace(kernel=kernel)


def model_layout(batch, heads, n, d, dtype=torch.bfloat16):
    """q, k, v as the model passes them: (batch, heads, n, d) views of (batch, n, heads, d) projections."""
    qkv = torch.zeros(batch, n, 3, heads, d, dtype=dtype)
    return [t.transpose(1, 2) for t in qkv.unbind(2)]


def test_the_sm90_dispatch_names_gluon_where_it_takes_the_shape():
    q, k, v = model_layout(2, 4, 256, 64)
    assert forward_kernel(q, k, v, HOPPER) == "gluon"
    assert forward_kernel(q, k, v, AMPERE) == "triton"
    assert forward_kernel(q, k, v, None) == "triton"  # a CPU, or Triton's interpreter
    assert forward_kernel(*model_layout(2, 4, 256, 64, torch.float32), HOPPER) == "triton"  # 16-bit only
    assert forward_kernel(*model_layout(2, 4, 256, 80), HOPPER) == "triton"  # the 2.7B model's head size
    # the five-product backward from 4096 keys in 128 programs or more (flash_attention_gluon_backward.pays)
    long = model_layout(2, 4, 4096, 64)
    assert backward_kernel(*long, long[0], HOPPER) == "gluon"
    assert backward_kernel(*long, long[0], AMPERE) == "triton"
    assert backward_kernel(q, k, v, q, HOPPER) == "triton"  # 256 keys: the Triton kernels are faster there
    wide = model_layout(4, 16, 2048, 128)  # d = 128: from 2048 keys in 256 programs or more
    assert backward_kernel(*wide, wide[0], HOPPER) == "gluon"
    row = model_layout(1, 1, 16384, 128)  # 128 programs: the portable kernels are faster there
    assert backward_kernel(*row, row[0], HOPPER) == "triton"
    assert "16384 keys in 128 programs" in flash_attention_gluon_backward.unsupported(*row, row[0], HOPPER)


def test_the_sm90_backward_is_triton_where_deterministic_algorithms_are_asked_for(monkeypatch):
    long = model_layout(2, 4, 4096, 64)
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    assert backward_kernel(*long, long[0], HOPPER) == "triton"


def test_a_row_names_each_pass_where_they_ran_different_kernels(monkeypatch):
    monkeypatch.setattr(flash_attention, "RAN", {"forward": Plan("gluon"), "backward": Plan("triton")})
    assert attention_kernel("flash_triton") == "gluon forward, triton backward"
    flash_attention.RAN["backward"] = Plan("gluon")
    assert attention_kernel("flash_triton") == "gluon"
    forget_kernels()
    assert attention_kernel("flash_triton") == ""  # nothing ran since
    assert attention_kernel("sdpa") == "sdpa" and attention_kernel("naive") == "pytorch"


@pytest.mark.skipif(not flash_attention.INTERPRET, reason="our kernels run on a CPU only under Triton's interpreter")
def test_a_cpu_row_names_the_triton_kernels():
    spec = BenchmarkSpec(
        "nano", (16,), attentions=("naive", "sdpa", "flash_triton"), warmup_steps=0, budget=Budget(1, max_steps=1)
    )
    rows = pd.DataFrame(run_benchmark(spec, modes=("forward", "train_step"), device=torch.device("cpu")))
    assert (rows["status"] == "ok").all()
    named = rows.set_index(["mode", "attention"])["attention_kernel"]
    for mode in ("forward", "train_step"):
        assert named[mode, "flash_triton"] == "triton"
        assert named[mode, "naive"] == "pytorch" and named[mode, "sdpa"] == "sdpa"


def flash_rows(kernels: dict) -> pd.DataFrame:
    """Sweep or leaderboard rows of ours and naive attention; ours' attention_kernel per (seq, pass)."""
    return pd.DataFrame(
        [
            {
                "implementation": impl,
                "pass": pass_,
                "seq": seq,
                "d": 64,
                "dtype": "bf16",
                "median_ms": 1.0,
                "tflops": 1.0,
                "peak_mem_gib": 0.1,
                "rel_diff_vs_sdpa_flash": 1e-3,
                "warmup_ms": 25,
                "rep_ms": 100,
                "attention_kernel": kernel if impl == "ours_triton" else "",
                "status": "ok",
                "note": "",
                "device_name": "NVIDIA H100 80GB HBM3",
            }
            for (seq, pass_), kernel in kernels.items()
            for impl in ("ours_triton", "naive")
        ]
    )


def test_the_flash_section_names_the_kernels_ours_ran():
    both = "gluon forward, triton backward"
    sweep = flash_rows(
        {
            (1024, "forward"): "gluon",
            (1024, "forward_backward"): both,
            (2048, "forward_backward"): both,
            (32768, "forward_backward"): "gluon",
        }
    )
    leaderboard = flash_rows({(16384, "forward"): "gluon", (16384, "forward_backward"): "gluon"})
    text = flash_section.render(leaderboard, sweep)
    assert "Ours ran: Gluon." in text
    assert "ours_triton ran: Gluon forward, Triton backward at seq 1024, seq 2048; Gluon at seq 32768." in text


def test_rows_written_before_the_column_name_no_kernels():
    rows = flash_rows({(1024, "forward"): "triton"}).drop(columns="attention_kernel")
    assert kernels_sentence(rows, "Ours", lambda r: r["pass"]) == ""


@pytest.mark.parametrize("result", ["e2e", "ladder", "flash/leaderboard", "flash_sweep"])
def test_the_rows_that_name_the_kernel_declare_it(result):
    """The report reads ``attention_kernel`` from these results' rows: their study declares it."""
    from lmperf import registry

    assert registry.declared(result)["attention_kernel"] is str


def test_a_row_names_the_tiles_the_autotuner_picked_for_each_portable_kernel_that_ran():
    """After a forward and backward at d = 32 (the portable kernels on every GPU, and the only ones on
    a CPU), the row's tiles name forward, dQ and dK/dV, each one of its kernel's configs; after
    forget_kernels, none; attentions other than ours name none."""
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    q, k, v = (torch.randn(1, 64, 32, device=DEVICE, dtype=dtype).requires_grad_() for _ in range(3))
    forget_kernels()
    FlashAttentionTriton.apply(q, k, v, True).sum().backward()
    named = attention_tiles("flash_triton")
    assert re.fullmatch(r"forward \S+ \S+ \S+, dq \S+ \S+ \S+, dkdv \S+ \S+ \S+", named), named
    forward, dkdv, dq = flash_attention.KERNELS[dtype]
    plans = flash_attention.RAN
    launchers = {"forward": plans["forward"].portable[0], "dq": plans["backward"].dq, "dkdv": plans["backward"].dkdv}
    for (name, kernel), part in zip({"forward": forward, "dq": dq, "dkdv": dkdv}.items(), named.split(", ")):
        bq, bk, warps, stages = map(int, re.fullmatch(rf"{name} (\d+)x(\d+) (\d+)w (\d+)s", part).groups())
        config = launchers[name].config  # the pick this pass's plan ran, one of its own kernel's configs
        assert config in kernel.configs, name
        assert (bq, bk, warps, stages) == (config.kwargs["BLOCK_Q"], config.kwargs["BLOCK_K"], config.num_warps,
                                           config.num_stages), name  # fmt: skip
    forget_kernels()
    assert attention_tiles("flash_triton") == "" and attention_tiles("sdpa") == ""
