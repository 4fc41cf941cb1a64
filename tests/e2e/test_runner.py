"""The campaign runner as a process: watchdog, control, retries, resume, no orphans, one
runner per campaign, and campaign state rebuilt from events. Real processes throughout."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.events import read_events
from engine.observe.follow import CampaignFollower
from engine.observe.state import CampaignState, rebuild
from engine.results.read import read_rows
from tests.e2e.conftest import (
    X_BLOCK,
    X_SLOW,
    _env,
    campaign_text,
    gone,
    one_job,
    start,
    wait_for,
    write_campaign,
)

pytestmark = pytest.mark.slow

EXPERIMENTS = (X_BLOCK + one_job("X_busy", "busy_silent", model_kwargs="{ busy_s = 6.0 }")
               + one_job("X_grandchild", "grandchild_then_block")
               + one_job("X_quick", "mlp", k=2, epochs=2, lr=0.01, optimizer="adam") + X_SLOW)

# Fast checks so hung cells are found in seconds: suspect after 2 quiet checks, hung after 4.
WATCHDOG = """
[watchdog]
interval_s = 0.5
suspect_after = 2
hung_after = 4
action = "{action}"
"""


def _campaign(tmp: Path, experiments: str, action: str = "kill", extra: str = "",
              name: str = "rt") -> Path:
    return write_campaign(tmp, campaign_text(name, experiments, extra=extra)
                          + WATCHDOG.format(action=action), EXPERIMENTS)


def _runner(tmp: Path, *args: str) -> subprocess.Popen:
    return start(tmp, "campaign.toml", *args, module="engine.runner", env=_env())


def _runner_events(tmp: Path, name: str = "rt") -> list[dict]:
    return read_events(tmp / "runs" / name / "runner.jsonl")


def test_hung_cell_is_killed_busy_cell_is_not(tmp_path):
    _campaign(tmp_path, "X_block,X_busy")
    proc = _runner(tmp_path)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"]) for g in groups] == [("X_block", "killed"), ("X_busy", "ok")]
    assert groups[0]["error"].startswith("hung: 4 checks without progress")
    kinds = [e["type"] for e in _runner_events(tmp_path)]
    assert kinds.index("suspect") < kinds.index("hung") < kinds.index("killed")
    # the busy cell computed for 6 s without an event, 12 checks: never even suspect twice
    busy_key = groups[1]["cell_key"]
    assert not [e for e in _runner_events(tmp_path) if e["type"] == "hung" and e["cell"] == busy_key]
    # the stack dump asked for before the kill is in the attempt's stacks/, named in its log
    attempt = next((tmp_path / "runs" / "rt" / "cells").glob("*X_block*/attempt-1"))
    dump = next((attempt / "stacks").glob("cell-*.txt")).read_text()
    assert "most recent call first" in dump and "in forward" in dump
    assert "stacks/cell-" in (attempt / "cell.log").read_text()


def test_grandchild_holding_output_dies_with_the_cell(tmp_path):
    _campaign(tmp_path, "X_grandchild")
    proc = _runner(tmp_path)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    log = next((tmp_path / "runs" / "rt" / "cells").glob("*/attempt-1/cell.log")).read_text()
    grandchild = int(log.split("GRANDCHILD ")[1].split()[0])
    assert gone(grandchild)
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert groups[0]["status"] == "killed" and "hung" in groups[0]["error"]


def test_sigkill_of_runner_leaves_no_survivor_and_resume_finishes(tmp_path):
    _campaign(tmp_path, "X_slow,X_quick")
    proc = _runner(tmp_path)
    events = wait_for(lambda: list((tmp_path / "runs" / "rt" / "cells").glob("*/attempt-1/events.jsonl"))
                       if (tmp_path / "runs" / "rt" / "cells").exists() else None, what="a cell")
    wait_for(lambda: any(e["type"] == "job_progress" for e in read_events(events[0])),
              what="first progress")
    cell_pid = next(e["pid"] for e in read_events(events[0]) if e["type"] == "started")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    wait_for(lambda: gone(cell_pid), timeout=15, what="the cell to die with its runner")
    assert not (tmp_path / "runs" / "master_groups.csv").exists()  # it never finished
    # resume: the next runner records the orphaned attempt, then runs both cells once
    (tmp_path / "experiments.toml").write_text(EXPERIMENTS.replace("epochs = 300", "epochs = 2"))
    _campaign(tmp_path, "X_slow,X_quick")
    (tmp_path / "experiments.toml").write_text(EXPERIMENTS.replace("epochs = 300", "epochs = 2"))
    second = _runner(tmp_path, "--resume")
    out, err = second.communicate(timeout=180)
    assert second.returncode == 0, err
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    statuses = [(g["exp_id"], g["status"], g["attempt"]) for g in groups]
    assert ("X_slow", "killed", "1") == statuses[0]
    assert "ended while this attempt ran" in groups[0]["error"]
    assert sorted(statuses[1:]) == [("X_quick", "ok", "1"), ("X_slow", "ok", "1")]
    # resuming again runs nothing: every key has its one ok row
    third = _runner(tmp_path, "--resume")
    third.communicate(timeout=120)
    assert third.returncode == 0
    assert len(read_rows(tmp_path / "runs" / "master_groups.csv")) == 3


def test_second_runner_is_refused_and_control_commands_work(tmp_path):
    _campaign(tmp_path, "X_block,X_quick,X_busy", action="flag", extra="retries = 3")
    first = _runner(tmp_path)
    live = CampaignState()
    follower = CampaignFollower(tmp_path / "runs" / "rt")

    def follow():
        for event in follower.poll():
            live.apply(event)
        return live

    wait_for(lambda: (tmp_path / "runs" / "rt" / "runner.pid").exists(), what="runner.pid")
    second = _runner(tmp_path)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 2
    assert f"runner pid {first.pid}" in err and len(err.strip().splitlines()) == 1

    def hung(attempt):
        return any(e["type"] == "hung" and e["attempt"] == attempt for e in _runner_events(tmp_path))

    wait_for(lambda: follow() and hung(1), what="the first hang")
    assert follow().cells[next(iter(live.cells))].state == "hung"  # flagged, not killed
    control = [sys.executable, "-m", "fugue_tui", "control", "runs/rt"]
    subprocess.run(control + ["skip", "3"], cwd=tmp_path, check=True, env=_env())
    subprocess.run(control + ["retry", "1"], cwd=tmp_path, check=True, env=_env())
    wait_for(lambda: follow() and hung(2), what="the retried attempt to hang")
    subprocess.run(control + ["kill", "1"], cwd=tmp_path, check=True, env=_env())
    out, err = first.communicate(timeout=180)
    assert first.returncode == 1, err
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"], g["attempt"]) for g in groups] == [
        ("X_busy", "skipped", "1"), ("X_block", "killed", "1"), ("X_block", "killed", "2"),
        ("X_quick", "ok", "1")]
    assert "skipped by control command" in groups[0]["error"]
    assert "retry" in groups[1]["error"] and "killed by control command" in groups[2]["error"]
    # SIGTERM stops the whole session, the monitor included: nothing needed SIGKILL, and
    # the killed attempts' samples files were completed (no .partial left).
    assert all("SIGKILL needed" not in g["error"] for g in groups), groups
    assert not list((tmp_path / "runs" / "samples").glob("*.partial"))
    # a manual retry does not consume the budget, and a killed cell is not retried
    retried = [e for e in _runner_events(tmp_path) if e["type"] == "retried"]
    assert [e["manual"] for e in retried] == [True]
    # the state a late front end rebuilds from the files equals the one followed live
    follow()
    rebuilt = rebuild(tmp_path / "runs" / "rt")
    assert rebuilt == live
    assert [c.state for c in sorted(rebuilt.cells.values(), key=lambda c: c.index)] == [
        "killed", "done", "skipped"]
    assert rebuilt.state == "done" and rebuilt.exit_code == 1


def test_abort_stops_the_campaign(tmp_path):
    _campaign(tmp_path, "X_slow,X_quick")
    proc = _runner(tmp_path)
    wait_for(lambda: any(e["type"] == "cell_started" for e in _runner_events(tmp_path))
              if (tmp_path / "runs" / "rt" / "runner.jsonl").exists() else False, what="start")
    subprocess.run([sys.executable, "-m", "fugue_tui", "control", "runs/rt", "abort"],
                   cwd=tmp_path, check=True, env=_env())
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"]) for g in groups] == [("X_slow", "killed")]
    assert rebuild(tmp_path / "runs" / "rt").state == "aborted"
