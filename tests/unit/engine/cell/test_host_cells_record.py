"""The runner's concurrency record (engine.cell.protocol: written by the runner's lanes,
read by a cell of a multi-device campaign when it writes its rows)."""

from __future__ import annotations

from engine.cell.concurrency import concurrency_columns
from engine.cell.protocol import HOST_CELLS, read_host_cells, write_host_cells


def test_the_record_round_trips_and_replaces_whole(tmp_path):
    assert read_host_cells(tmp_path) is None  # a one-device campaign writes none
    write_host_cells(tmp_path, 2, [])
    write_host_cells(tmp_path, 3, ["MIG-b"])
    assert read_host_cells(tmp_path) == {"max": 3, "mig_shared": ["MIG-b"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == [HOST_CELLS]  # no .tmp left


def test_a_torn_or_foreign_record_counts_as_none(tmp_path):
    (tmp_path / HOST_CELLS).write_text('{"max": 2')
    assert read_host_cells(tmp_path) is None
    (tmp_path / HOST_CELLS).write_text("[1, 2]")
    assert read_host_cells(tmp_path) is None


def test_columns_from_the_record(tmp_path):
    assert concurrency_columns(tmp_path, None, None) == ({}, [], False)
    write_host_cells(tmp_path, 2, [])
    columns, warnings, withheld = concurrency_columns(tmp_path, [0, 1], None)
    assert columns == {"host_concurrent_cells": 2} and not withheld
    assert "2 cells ran on this host at once" in warnings[0] and "its own 2" in warnings[0]
    write_host_cells(tmp_path, 2, ["MIG-x"])
    columns, warnings, withheld = concurrency_columns(tmp_path, None, "nvml slow")
    assert withheld and columns["energy_group"] is None and columns["energy_method"] == "none"
    assert columns["gpu_metrics_missing"].startswith("nvml slow; energy: not attributed")
