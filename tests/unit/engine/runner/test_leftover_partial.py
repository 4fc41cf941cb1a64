"""A 0-byte ``.csv.partial`` samples file (a sampler killed, or on a full disk, before it
wrote its header) does not survive the attempt's row nor the ``--resume`` (issue 43): the
runner's row for the cell does not name it and the file is gone. A real runner over a
stand-in cell (a real process that leaves the file and dies without a row)."""

from __future__ import annotations

import subprocess
import sys

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.results.columns import GROUPS_FILE
from engine.results.read import read_rows
from engine.runner.supervisor import Runner

LEAVE_EMPTY_PARTIAL = (
    "import json, pathlib, sys; s = json.load(open(sys.argv[1])); "
    "p = pathlib.Path(s['runs_dir']) / 'samples' / (s['group_id'] + '.csv.partial'); "
    "p.parent.mkdir(parents=True, exist_ok=True); p.touch(); raise SystemExit(1)")


def test_an_empty_partial_samples_file_is_not_left_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        return subprocess.Popen([sys.executable, "-c", LEAVE_EMPTY_PARTIAL, str(spec_path)],
                                start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    runs = tmp_path / "runs"
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'device = "cpu"\nruns_dir = "{runs}"\n')
    for resume in (False, True):
        Runner(load_campaign(campaign), resume=resume).run()
        rows = read_rows(runs / GROUPS_FILE)
        assert rows and all(r["status"] == "failed" for r in rows)
        assert all(not r.get("samples_file") for r in rows)  # no row names an empty file
        assert list((runs / "samples").glob("*.partial")) == []
    assert len(rows) == 2  # the resume ran the failed cell again, and it left nothing either
