"""A flood of control commands at a real runner (issue 44): 120 ``retry 1`` in under 2 s
once killed 18 attempts of cell 1 in about a second. A retry applies at most once per
attempt: the repeats — sent before the applied one was, or while the attempt it started is
starting — are answered "already applied" and do nothing; so are repeated kills.

The runner is the real one (:class:`engine.runner.supervisor.Runner`), the commands real
files (:func:`engine.runner.control.send`); the cells are torch-free stand-ins (real
processes that say they started and wait to be stopped), so the test takes seconds."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.results.columns import GROUPS_FILE
from engine.results.read import read_rows
from engine.runner.commands import ALREADY, RETRY_SETTLE_S
from engine.runner.control import send
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]

CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
passes = 2
device = "cpu"
runs_dir = "{runs}"
"""

#: A torch-free cell: says it started, then waits to be stopped.
STAND_IN = """
import json, os, sys, time
from engine.events import EventWriter
spec = json.load(open(sys.argv[1]))
events = EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"])
events.emit("started", pid=os.getpid(), exp_id=spec["cell"]["exp_id"],
            executor=spec["cell"]["executor"], jobs=[])
time.sleep(600)
"""

RETRIES = 120


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            return subprocess.Popen([sys.executable, "-c", STAND_IN, str(spec_path)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)


def _events(run_dir: Path, kind: str) -> list[dict]:
    path = run_dir / "runner.jsonl"
    return [e for e in read_events(path) if e["type"] == kind] if path.exists() else []


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_retry_storm_runs_the_cell_once_more_and_repeats_are_already_applied(tmp_path,
                                                                                stand_in):
    (tmp_path / "c.toml").write_text(CAMPAIGN.format(runs=tmp_path / "runs"))
    runner = Runner(load_campaign(tmp_path / "c.toml"))
    run_dir = tmp_path / "runs" / "c"
    flood: dict[str, float] = {}
    problems: list[BaseException] = []

    def answers(cmd: str) -> list[dict]:
        return [e for e in _events(run_dir, "control") if e["cmd"] == cmd]

    def user():
        try:
            _wait(lambda: _events(run_dir, "cell_started"), "cell 1 to start")
            flood["start"] = time.monotonic()
            for i in range(RETRIES):  # evenly over 1.5 s, as a script in a loop sends them
                send(run_dir, "retry", "1")
                time.sleep(max(0.0, flood["start"] + 1.5 * (i + 1) / RETRIES - time.monotonic()))
            flood["end"] = time.monotonic()
            _wait(lambda: len(answers("retry")) == RETRIES, "every retry to be answered")
            for _ in range(3):  # a kill, pressed three times
                send(run_dir, "kill", "1")
            _wait(lambda: len(answers("kill")) == 3, "every kill to be answered")
            send(run_dir, "skip", "2")  # the campaign ends
        except BaseException as exc:  # told by the main thread
            problems.append(exc)
            send(run_dir, "abort")

    thread = threading.Thread(target=user, daemon=True)
    thread.start()
    outcome = runner.run()
    thread.join(10)
    assert not problems, problems
    # The flood fitted in the window the rule has to cover, so the count below is the rule's.
    assert flood["end"] - flood["start"] < RETRY_SETTLE_S

    key = outcome.outcomes[0].cell.key
    started = [e["attempt"] for e in _events(run_dir, "cell_started") if e["cell"] == key]
    assert started == [1, 2]  # one retry applied, not one per command
    retries = answers("retry")
    assert [e["applied"] for e in retries].count(True) == 1
    repeats = [e for e in retries if not e["applied"]]
    assert len(repeats) == RETRIES - 1
    assert all(e["reason"].startswith(ALREADY) for e in repeats), {e["reason"] for e in repeats}
    # the kill, pressed thrice, stopped attempt 2 once; the others were repeats
    kills = answers("kill")
    assert [e["applied"] for e in kills] == [True, False, False]
    assert all(e["reason"].startswith(ALREADY) for e in kills[1:]), kills
    rows = [(r["attempt"], r["status"]) for r in read_rows(tmp_path / "runs" / GROUPS_FILE)
            if r["cell_key"] == key]
    assert rows == [("1", "killed"), ("2", "killed")]
    assert [e["manual"] for e in _events(run_dir, "retried")] == [True]
