"""Typed cell specs for tests (engine.cell.protocol.CellRunSpec: the only spec the cell's and
the rows' functions take).

- :func:`real_cell_spec`: the runner's own spec (``Runner.cell_spec``), so it passes the
  cell's checks of every job, for a D_ens × seq cell whose attempt folder exists; for tests
  that run ``engine.cell.main`` in-process or write a ``spec.json``.
- :func:`hand_spec`: a spec of the fewest values, made here, for tests of one function that
  reads a few keys (the rows' builders); vary it with ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import load_campaign
from engine.define.matrix import CellSpec
from engine.runner.supervisor import Runner

ATTEMPT = Path("c") / "cells" / "001-D_ens-seq-p1-aaaa" / "attempt-1"

#: The matrix point of :func:`hand_spec`: one small D_ens job under seq, no compile.
HAND_CELL: dict[str, Any] = {
    "index": 1, "key": "aaaa", "exp_id": "D_ens", "executor": "seq", "compile_mode": "off",
    "pass_index": 1, "experiment": {"type": "ensemble", "size": "small"},
    "jobs": [{"job_id": "D_ens_m0", "amp": False}]}


def real_cell_spec(tmp_path: Path, group_id: str | None = None) -> CellRunSpec:
    """The runner's spec, ``runs_dir`` = ``tmp_path/runs``, its events file in
    :data:`ATTEMPT` under it (created)."""
    runs = tmp_path / "runs"
    campaign = tmp_path / "spec.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'device = "cpu"\nthreads = 1\nruns_dir = "{runs}"\n')
    runner = Runner(load_campaign(campaign))
    # through its JSON text, as a cell reads it: what a test gets is what spec.json gives
    spec = CellRunSpec.from_json(runner.cell_spec(runner.cells[0], 1).to_json())
    attempt = runs / ATTEMPT
    attempt.mkdir(parents=True)
    return dataclasses.replace(spec, events=str(attempt / "events.jsonl"),
                               group_id=group_id or spec.group_id)


def hand_spec(runs_dir: str | Path, cell: dict[str, Any] | None = None,
              **fields: Any) -> CellRunSpec:
    """A spec made here: campaign ``c`` (hash ``h``), attempt 1, the defaults of
    :class:`CellRunSpec` (cpu, seed 42, one pass), its events file in :data:`ATTEMPT` under
    ``runs_dir`` (not created: a function that writes rows outside an attempt folder finds
    no neighbours there); ``cell`` overrides keys of :data:`HAND_CELL`, ``fields`` the
    spec's own."""
    runs = Path(runs_dir)
    doc: dict[str, Any] = {"campaign_id": "c", "campaign_hash": "h", "runs_dir": str(runs),
                           "events": str(runs / ATTEMPT / "events.jsonl"), "attempt": 1,
                           **fields}
    return CellRunSpec(**doc, cell=CellSpec(**{**HAND_CELL, **(cell or {})}))

