"""The batch-size study on a CPU: its rows carry the declared columns, the first batch that does not fit
ends the list, and the report's table and sentences are its rows."""

import pandas as pd
import pytest

from conftest import markdown_tables
from lmperf import registry
from lmperf.measure.timing import HOST_BOUND
from lmperf.report import batch_section
from lmperf.studies import batch


def args(*extra: str):
    return batch.parse_args(
        ["--size", "nano", "--context-length", "16", "--batch-sizes", "1,2", "--device", "cpu", "--out", "-"]
        + ["--warmup-steps", "1", "--measured-steps", "2", "--max-seconds", "0", *extra]
    )


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return pd.DataFrame(batch.batch_rows(args()))


def test_rows_are_the_train_step_at_each_batch_with_the_declared_columns(rows):
    assert list(rows["batch_size"]) == [1, 2] and set(rows["mode"]) == {"train_step"}
    assert set(rows["status"]) == {"ok"} and set(rows["study"]) == {"batch"}
    assert set(registry.declared("batch")) <= set(rows.columns)
    assert (rows["tokens_per_s"] == rows["batch_size"] * 16 / (rows["median_ms"] / 1e3)).all()
    assert rows["host_overhead"].isna().all()  # no CUDA graph on a CPU: no graphed time to compare with
    assert set(rows["host_bound_threshold"]) == {HOST_BOUND}


def test_a_batch_that_does_not_fit_ends_the_list(monkeypatch):
    real = batch.run_benchmark

    def out_of_memory_from_2(spec, modes, device):
        (row,) = real(spec, modes=modes, device=device)
        if spec.batch_size >= 2:
            row.update(status="oom", note="CUDA out of memory")
        return [row]

    monkeypatch.setattr(batch, "run_benchmark", out_of_memory_from_2)
    got = batch.batch_rows(args("--batch-sizes", "1,2,4"))
    assert [(r["batch_size"], r["status"]) for r in got] == [(1, "ok"), (2, "oom")]
    text = batch_section.render(pd.DataFrame(got))
    assert "batch 2 ended the list (CUDA out of memory)" in text and "up to batch 1" in text


def test_the_report_table_is_the_rows(rows):
    text = batch_section.render(rows)
    shown = markdown_tables(text, "## Where does the host stop mattering?")
    assert len(shown) == len(rows)
    for (size, batch_size, launched, tokens), (_, row) in zip(shown, rows.iterrows()):
        assert (size, int(batch_size)) == (row["size"], row["batch_size"])
        assert float(launched) == pytest.approx(row["median_ms"], abs=0.005)
        assert float(tokens) == pytest.approx(row["tokens_per_s"], abs=0.5)
    assert "graphed (ms)" not in text and "host's share is not measured" in text


def graphed_rows(overheads, threshold):
    """Rows as a GPU would write them: launched = graphed x (1 + overhead)."""
    return pd.DataFrame(
        {
            "size": "small",
            "batch_size": [2**i for i in range(len(overheads))],
            "status": "ok",
            "note": "",
            "median_ms": [10 * (1 + o) for o in overheads],
            "graphed_median_ms": 10.0,
            "host_overhead": overheads,
            "host_bound_threshold": threshold,
            "tokens_per_s": 1.0,
            "mfu": 0.1,
            "graphed_mfu": 0.2,
            "precision": "bf16",
            "compile": "compiled",
            "attention": "naive",
            "context_length": 512,
            "device_name": "NVIDIA H100",
        }
    )


@pytest.mark.parametrize("threshold, from_batch", [(0.10, 4), (0.30, 2), (0.01, None)])
def test_the_batch_where_the_host_stops_mattering_uses_the_rows_threshold(threshold, from_batch):
    text = batch_section.render(graphed_rows([0.5, 0.2, 0.05, 0.02], threshold))
    limit = f"{100 * threshold:.0f}%"
    if from_batch is None:
        assert f"At no batch measured does launched time come within {limit} of graphed" in text
    else:
        assert f"From batch {from_batch} on, launched time comes within {limit} of graphed" in text
    assert "graphed (ms)" in text and "20.0%" in text  # the overhead column, from the rows


def test_the_figure_is_drawn_from_cpu_rows_and_from_graphed_ones(rows, tmp_path):
    """A CPU run has no graphed time: the overhead panel says so, and the figure is still drawn."""
    for name, frame in (("cpu", rows), ("gpu", graphed_rows([0.5, 0.2, 0.05], 0.1))):
        batch_section.batch_figure(frame, tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
