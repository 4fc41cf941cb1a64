"""What a cell of a multi-device campaign learns about its neighbours (issue 27): the
runner's concurrency record (``host_cells.json`` in the attempt folder, written by
:mod:`engine.runner.concurrent` while cells overlap) turned into row columns and warnings.
Torch-free.

- ``host_concurrent_cells``: the most cells that ran on this host at once while this
  cell's process ran (which contains its group window), itself included. Empty for a
  one-device campaign (there is no record: the runner runs one cell at a time).
- MIG: power and energy belong to the whole physical GPU. When a cell on another slice of
  the same GPU ran meanwhile, no energy is attributed to this cell: ``energy_group`` and
  the jobs' ``energy_j`` are left empty, ``energy_method`` is ``none`` and
  ``gpu_metrics_missing`` says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The record's format belongs to the runner-cell protocol (its writer is the runner's).
from engine.cell.protocol import HOST_CELLS
from engine.cell.protocol import read_host_cells as read_record

__all__ = ["HOST_CELLS", "read_record", "concurrency_columns"]


def concurrency_columns(attempt_dir: str | Path, cpus: list[int] | None,
                        missing: str | None) -> tuple[dict[str, Any], list[str], bool]:
    """``(group columns, warnings, energy withheld)`` from the record. ``cpus``: the cores
    the cell was pinned to; ``missing``: the row's ``gpu_metrics_missing`` so far."""
    record = read_record(attempt_dir)
    if record is None:
        return {}, [], False
    cells = int(record.get("max") or 1)
    columns: dict[str, Any] = {"host_concurrent_cells": cells}
    warnings = []
    if cells > 1:
        share = f"its own {len(cpus)} of the host's cores" if cpus else "all the host's cores"
        warnings.append(f"{cells} cells ran on this host at once during this cell (on "
                        f"{share}): they shared memory bandwidth and PCIe")
    shared = [str(u) for u in record.get("mig_shared") or []]
    if not shared:
        return columns, warnings, False
    why = ("energy: not attributed (another cell ran on the same physical GPU meanwhile, "
           f"MIG {', '.join(shared)}: power and energy belong to the whole card)")
    columns.update(energy_group=None, energy_method="none",
                   gpu_metrics_missing="; ".join(x for x in (missing, why) if x))
    warnings.append(why)
    return columns, warnings, True
