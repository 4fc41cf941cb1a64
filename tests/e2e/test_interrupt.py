"""Ctrl-C during ``--batch``: the running cell's session is stopped, recorded as killed, the
campaign exits non-zero, and no process of the cell survives."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from engine.events import read_events
from engine.results.read import read_rows
from tests.e2e.conftest import EXPERIMENTS, _env, campaign_text, start, write_campaign

pytestmark = pytest.mark.slow

CAMPAIGN = campaign_text("interrupt", "D_reg,D_ens")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_cell_and_records_it(tmp_path, sig):
    write_campaign(tmp_path, CAMPAIGN, EXPERIMENTS + "\n[experiments.D_reg]\nepochs = 400\n")
    proc = start(tmp_path, "--batch", "campaign.toml", env=_env())
    try:
        deadline = time.monotonic() + 120
        events_file = None
        while time.monotonic() < deadline:  # wait for the first training progress
            found = list(tmp_path.glob("runs/*/cells/*D_reg*/attempt-1/events.jsonl"))
            if found and any(e["type"] == "job_progress" for e in read_events(found[0])):
                events_file = found[0]
                break
            time.sleep(0.2)
        assert events_file is not None, "the cell never reported progress"
        cell_pid = next(e["pid"] for e in read_events(events_file) if e["type"] == "started")
        assert psutil.pid_exists(cell_pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: the running cell was stopped" in err
    assert not psutil.pid_exists(cell_pid) or psutil.Process(cell_pid).status() == psutil.STATUS_ZOMBIE
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"]) for g in groups] == [("D_reg", "killed")]
    assert "interrupted" in groups[0]["error"] and groups[0]["T_group"] == ""
    # the second cell never started
    assert not list(tmp_path.glob("runs/*/cells/*D_ens*"))
    # no half-written job rows from the killed cell
    assert not (tmp_path / "runs" / "master_individual.csv").exists()
