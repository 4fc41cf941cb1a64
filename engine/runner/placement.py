"""Where each cell of a multi-device campaign runs (issue 27), decided before the first
cell starts, and the host resources the concurrent cells split. Torch-free.

**The rule.** A *unit* is one experiment in one pass: every cell of it (each executor,
compile mode, precision, K of a sweep) runs on one device, and unit ``u`` (in campaign
order, counting from 0) goes to device ``u mod n``. Every speedup the analysis forms
divides an executor's time by its experiment's seq baseline *of the same pass*, so both
times always come from one GPU: never a T4's seq over an A100's mp, never one card's
thermals or clocks against another's. Interference from the *other* devices (shared host
cores, memory bandwidth, PCIe) hits the baseline and the executor alike only if they run
under the same neighbours: that is why the host's cores are split (each device's cells
get their own cores, the same cores for every cell of a unit) and why each row records
how many cells ran on the host at once (``host_concurrent_cells``), so a reader can see
and filter what ran in company. ``one_cell_per_host``-strict measurements run one device.

The rule depends only on the campaign's cells and the number of devices (never on timing),
so a rerun places the same unit on the same device index; which physical device that is
is recorded per row (``gpu_uuid``, ``placement``) and kept out of the cell key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from engine.define.matrix import CellSpec
from engine.results.values import cpu_list  # noqa: F401 - the column's form, re-exported


@dataclass(frozen=True)
class Slot:
    """One device of the campaign and what its cells get: ``index`` (0-based, the order of
    ``devices``), the NVML identity (:func:`engine.measure.nvml.resolve_gpus`), the host
    cores its cells are pinned to (empty: not pinned)."""

    index: int
    gpu: dict[str, Any]
    cpus: tuple[int, ...] = field(default=())

    @property
    def uuid(self) -> str:
        return str(self.gpu.get("uuid") or "")

    @property
    def parent(self) -> str:
        """The physical GPU: a MIG slice's parent UUID, else the device's own."""
        return str(self.gpu.get("parent_uuid") or self.uuid)

    def describe(self, n: int) -> str:
        """``device 2/3 cuda:1 GPU-…``: what the ``placement`` column says."""
        entry = str(self.gpu.get("entry") or "")
        named = f"{entry} {self.uuid}" if entry and entry != self.uuid else self.uuid
        return f"device {self.index + 1}/{n} {named}".strip()


def units(cells: list[CellSpec]) -> list[tuple[str, int]]:
    """The placement units (experiment id, pass) in campaign order."""
    return list(dict.fromkeys((c.exp_id, c.pass_index) for c in cells))


def place(cells: list[CellSpec], n_devices: int) -> dict[str, int]:
    """``{cell key: device index}`` by the rule of the module docstring."""
    order = {unit: i % n_devices for i, unit in enumerate(units(cells))}
    return {c.key: order[(c.exp_id, c.pass_index)] for c in cells}


def split_cores(n_slots: int, cpus: list[int] | None = None) -> list[tuple[int, ...]]:
    """The host cores this process may use (its affinity), split into ``n_slots``
    contiguous shares as even as possible (the first shares get the extra cores). With
    fewer cores than slots every slot shares all cores (nothing to split; the rows' core
    count says so).

    >>> split_cores(2, [0, 1, 2, 3, 4])
    [(0, 1, 2), (3, 4)]
    """
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            list(range(os.cpu_count() or 1))
    if n_slots <= 1 or len(cpus) < n_slots:
        return [tuple(cpus)] * max(n_slots, 1)
    base, extra = divmod(len(cpus), n_slots)
    out, at = [], 0
    for i in range(n_slots):
        size = base + (1 if i < extra else 0)
        out.append(tuple(cpus[at:at + size]))
        at += size
    return out
