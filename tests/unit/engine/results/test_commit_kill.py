"""A cell SIGKILLed between its job rows and its group row (issue 43): the group row is the
commit record, so no reader shows those job rows, and the runner's row for the dead
attempt removes them instead of committing them under its ``killed``/``failed`` row.

A real subprocess appends a group with :func:`engine.results.store.append_group` and is
SIGKILLed the moment ``master_individual.csv`` grows; it holds still between the two
appends (a pause injected after the first), so every try lands in the window."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
from engine.results.commit import append_failed_group
from engine.results.load import load_runs
from engine.results.read import read_rows
from engine.results.store import append_group
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]

#: Appends one group (2 ok jobs); after the job rows it stops until it is killed.
WRITER = """
import sys, time
import engine.results.store as store
runs, gid, key = sys.argv[1:4]
real = store._append_locked
def paused(real_path, shown, rows, cols):
    out = real(real_path, shown, rows, cols)
    if real_path.name == "master_individual.csv":
        time.sleep(600)  # between the job rows and the group row: killed here
    return out
store._append_locked = paused
store.append_group(runs, {"group_id": gid, "exp_id": "D_ens", "executor": "seq",
                          "status": "ok", "cell_key": key, "T_group": 1.0},
                   [{"group_id": gid, "job_id": f"J{i}", "status": "ok"} for i in range(2)])
"""


def _kill_when_grows(proc: subprocess.Popen, path: Path, before: int) -> None:
    """SIGKILL ``proc`` the moment ``path`` is larger than ``before`` bytes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > before:
            os.kill(proc.pid, signal.SIGKILL)
            return
        if proc.poll() is not None:
            raise AssertionError("the writer ended before it was killed")
        time.sleep(0.005)
    raise AssertionError("master_individual.csv never grew")


def _visible_jobs(runs: Path, gid: str) -> int:
    return int((load_runs(runs).jobs["group_id"] == gid).sum())


TRIES = 20  # the kill loop: 20 tries, 0 such job rows visible


def test_job_rows_of_a_cell_killed_before_its_group_row_are_visible_to_no_reader(tmp_path):
    runs = tmp_path / "runs"
    append_group(runs, {"group_id": "seq_kept", "exp_id": "D_ens", "executor": "seq",
                        "status": "ok", "T_group": 1.0},
                 [{"group_id": "seq_kept", "job_id": "J0", "status": "ok"}])
    jobs = runs / INDIVIDUAL_FILE
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    left_on_disk = 0
    for n in range(TRIES):
        gid = f"seq_kill{n}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(runs), gid, f"k{n}"],
                                env=env)
        _kill_when_grows(proc, jobs, jobs.stat().st_size)
        assert proc.wait(10) == -signal.SIGKILL
        # the kill landed between the two: the job rows are on disk, the group row is not
        left_on_disk += sum(r["group_id"] == gid for r in read_rows(jobs))
        assert not any(r["group_id"] == gid for r in read_rows(runs / GROUPS_FILE))
        loaded = load_runs(runs)
        assert _visible_jobs(runs, gid) == 0
        assert any("without their group row" in note for note in loaded.notes)
        if n % 2:  # the runner records the dead attempt: the rows go, never committed
            told = append_failed_group(runs, {"group_id": gid, "status": "killed",
                                              "exp_id": "D_ens", "executor": "seq"})
            assert len(told) == 1 and "2 job rows of group" in told[0]
            assert not any(r["group_id"] == gid for r in read_rows(jobs))
            assert _visible_jobs(runs, gid) == 0
    assert left_on_disk == 2 * TRIES
    # what was committed stays
    assert _visible_jobs(runs, "seq_kept") == 1


def test_the_runners_row_for_a_committed_group_removes_nothing(tmp_path):
    runs = tmp_path / "runs"
    append_group(runs, {"group_id": "seq_1", "status": "ok"},
                 [{"group_id": "seq_1", "job_id": "J0", "status": "ok"}])
    assert append_failed_group(runs, {"group_id": "seq_1", "status": "failed"}) == []
    assert len(read_rows(runs / INDIVIDUAL_FILE)) == 1


# --------------------------------------------------------------------------- the runner

#: A torch-free cell that writes its rows as engine.cell.rows does, paused between them.
STAND_IN = """
import json, os, sys, time
from engine.events import EventWriter
import engine.results.store as store
spec = json.load(open(sys.argv[1]))
events = EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"])
events.emit("started", pid=os.getpid(), exp_id=spec["cell"]["exp_id"],
            executor=spec["cell"]["executor"], jobs=[])
gid = spec["group_id"]
real = store._append_locked
def paused(real_path, shown, rows, cols):
    out = real(real_path, shown, rows, cols)
    if real_path.name == "master_individual.csv":
        time.sleep(600)
    return out
store._append_locked = paused
store.append_group(spec["runs_dir"], {"group_id": gid, "status": "ok",
                                      "cell_key": spec["cell"]["key"]},
                   [{"group_id": gid, "job_id": "J0", "status": "ok"}])
"""


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")
    cells: list[subprocess.Popen] = []

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-c", STAND_IN, str(spec_path)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        cells.append(proc)
        return proc

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    return cells


def test_the_runner_never_commits_the_job_rows_of_a_cell_killed_between_them(tmp_path,
                                                                             stand_in):
    runs = tmp_path / "runs"
    spec = tmp_path / "c.toml"
    spec.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                    f'passes = 1\ndevice = "cpu"\nruns_dir = "{runs}"\n')
    runner = Runner(load_campaign(spec))

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if stand_in and (runs / INDIVIDUAL_FILE).exists():
                os.kill(stand_in[0].pid, signal.SIGKILL)
                return
            time.sleep(0.005)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    outcome = runner.run()
    thread.join(5)
    assert [o.status for o in outcome.outcomes] != ["ok"]
    (group,) = read_rows(runs / GROUPS_FILE)
    assert group["status"] in ("failed", "killed")
    assert read_rows(runs / INDIVIDUAL_FILE) == []  # removed, not only hidden
    assert load_runs(runs).jobs.empty
