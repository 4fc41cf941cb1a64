"""An events file replaced by rename while its cell runs (as editors and ``sed -i`` do,
issue 43): the cell keeps writing the file it opened, so the runner must keep reading that
one, not whatever the path names now; else it sees no progress and kills a healthy cell.

A real torch-free stand-in cell reports progress every 50 ms for about 1.5 s; the
watchdog declares a cell hung after 0.3 s without progress."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.events import EventTail, EventWriter
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]

CELL = """
import json, os, sys, time
from engine.events import EventWriter
spec = json.load(open(sys.argv[1]))
events = EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"])
events.emit("started", pid=os.getpid(), exp_id=spec["cell"]["exp_id"],
            executor=spec["cell"]["executor"], jobs=[])
for n in range(30):
    events.emit("phase", phase="setup", seconds=0.05)
    time.sleep(0.05)
"""


def _replace_by_rename(path: Path) -> None:
    tmp = path.with_name(path.name + ".edited")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)


@pytest.fixture
def cell(monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-c", CELL, str(spec_path)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        events = Path(spec_path).with_name("events.jsonl")
        deadline = time.monotonic() + 60
        while not (events.exists() and b'"started"' in events.read_bytes()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        _replace_by_rename(events)  # the cell writes on into the file it opened
        return proc

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)


def test_a_cell_whose_events_file_is_replaced_by_rename_is_not_killed(tmp_path, cell):
    runs = tmp_path / "runs"
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'passes = 1\ndevice = "cpu"\nruns_dir = "{runs}"\n'
                        "[watchdog]\ninterval_s = 0.1\nsuspect_after = 1\nhung_after = 3\n")
    outcome = Runner(load_campaign(campaign)).run()
    assert [(o.status, o.error) for o in outcome.outcomes] == [("ok", "")]


def test_a_held_tail_reads_the_file_it_opened_after_the_path_is_replaced(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path, cell="k", attempt=1)
    writer.emit("phase", phase="setup", seconds=1.0)
    tail = EventTail(path, hold=True)
    assert [e.type for e in tail.read()] == ["phase"]
    _replace_by_rename(path)
    writer.emit("phase", phase="teardown", seconds=2.0)  # into the file it opened
    assert [e["phase"] for e in tail.read()] == ["teardown"]
    tail.close()
    writer.close()
