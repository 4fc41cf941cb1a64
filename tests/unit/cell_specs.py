"""A real cell spec for tests that run ``engine.cell.main`` in-process: the runner's own
(``Runner.cell_spec``), so it passes the cell's checks of every job, for a D_ens × seq cell
whose attempt folder exists."""

from __future__ import annotations

import json
from pathlib import Path

from engine.define.campaign import load_campaign
from engine.runner.supervisor import Runner

ATTEMPT = Path("c") / "cells" / "001-D_ens-seq-p1-aaaa" / "attempt-1"


def real_cell_spec(tmp_path: Path, group_id: str | None = None) -> dict:
    """The spec as a JSON document, ``runs_dir`` = ``tmp_path/runs``, its events file in
    :data:`ATTEMPT` under it (created)."""
    runs = tmp_path / "runs"
    campaign = tmp_path / "spec.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'device = "cpu"\nthreads = 1\nruns_dir = "{runs}"\n')
    runner = Runner(load_campaign(campaign))
    spec = json.loads(json.dumps(runner.cell_spec(runner.cells[0], 1).to_dict()))
    attempt = runs / ATTEMPT
    attempt.mkdir(parents=True)
    spec["events"] = str(attempt / "events.jsonl")
    if group_id:
        spec["group_id"] = group_id
    return spec
