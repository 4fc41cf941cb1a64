"""Strategies compared on one stream (issue 51, engine.results.stream_report): pooled over
passes by stream, configuration and machine; an interval only from 5 passes; failed rows
and batch rows left out."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from engine.results.stream_report import FIGURES, mean_interval, stream_cells


def test_the_interval_needs_five_passes_and_is_reproducible():
    assert mean_interval([]) == (None, None, None)
    assert mean_interval([1.0, 2.0, math.nan]) == (1.5, None, None)
    values = [1.0, 1.2, 0.9, 1.1, 1.3, 0.8]
    mean, low, high = mean_interval(values)
    assert mean == pytest.approx(sum(values) / 6)
    assert low is not None and high is not None and low < mean < high
    assert min(values) <= low and high <= max(values)
    assert mean_interval(values) == (mean, low, high)


def _row(executor: str, config_key: str, jct: float, status: str = "ok",
         sha: str = "s1") -> dict:
    return {"machine": "m", "gpu_name": "", "torch_version": "2", "cuda_version": "",
            "status": status, "stream_sha256": sha, "config_key": config_key,
            "executor": executor, "compile_mode": "off",
            "max_parallel": 1.0 if executor == "seq" else 2.0, "stream_jobs": 6.0,
            "arrival_rate_jps": 2.0,
            **{name: jct if name.startswith("jct") else 1.0 for name in FIGURES}}


def test_cells_pool_passes_of_one_stream_and_configuration_seq_first():
    rows = ([_row("mp", "c-mp", 0.5 + i / 10) for i in range(5)]
            + [_row("seq", "c-seq", 2.0 + i / 10) for i in range(3)]
            + [_row("seq", "c-seq", 99.0, status="failed"),
               _row("seq", "c-seq", 7.0, sha="s2"), _row("seq", "c-x", 5.0, sha="")])
    cells = stream_cells(pd.DataFrame(rows))
    assert [(c["stream_sha256"], c["executor"], c["passes"]) for c in cells] == [
        ("s1", "seq", 3), ("s1", "mp", 5), ("s2", "seq", 1)]
    seq, mp, _ = cells
    assert seq["figures"]["jct_mean_s"]["mean"] == pytest.approx(2.1)
    assert seq["figures"]["jct_mean_s"]["ci_low"] is None  # 3 passes: no interval
    assert mp["figures"]["jct_p95_s"]["ci_low"] is not None
    assert mp["max_parallel"] == 2.0 and mp["figures"]["jct_mean_s"]["n"] == 5


def test_no_stream_rows_no_cells():
    assert stream_cells(pd.DataFrame([{**_row("seq", "c", 1.0), "stream_sha256": ""}])) == []
    assert stream_cells(pd.DataFrame([{"status": "ok"}])) == []
