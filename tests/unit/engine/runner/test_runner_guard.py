"""A runner killed by SIGKILL cleans up nothing itself; its guard (engine.runner.guard)
stops, within seconds, what its cells left running outside their sessions and removes their
scratch folders, and the next runner says so. Stand-ins throughout (no torch, no Ray): a
runner that only starts its guard, a cell session that outlived it, and a process carrying
a Ray runtime's tag in a session of its own, as Ray's agents do."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from engine import cleanup
from engine.events import read_events
from engine.executors.ray.runtime import CLEANUP_HANDLER, CLEANUP_NAME, TAG_ENV
from engine.runfolder import RunFolder
from engine.runner.cellproc import reap_leftovers, scratch_prefix

REPO = Path(__file__).resolve().parents[4]

#: A runner stand-in: starts its guard as Runner.run does, says its pid, waits to be killed.
RUNNER = """
import os, sys, time
from pathlib import Path
from engine.runner.guard import Guard
guard = Guard.start(Path(sys.argv[1]))
print(os.getpid(), guard.pid, flush=True)
time.sleep(120)
"""

SLEEPER = "import time; time.sleep(120)"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _left_attempt(run_dir: Path, runner_pid: int) -> tuple[Path, subprocess.Popen,
                                                             subprocess.Popen, Path]:
    """An attempt of runner ``runner_pid`` that never ended: its cell.pid naming a live
    session, a Ray cleanup record whose runtime is a tagged process in a session of its
    own and a ``/tmp/fr-*`` folder."""
    attempt = RunFolder(run_dir).attempt("001-X-ray-p1", "k" * 16, 1)
    attempt.path.mkdir(parents=True)
    cell = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    attempt.pid.write_text(json.dumps({"pid": cell.pid, "sid": cell.pid,
                                       "runner_pid": runner_pid, "host": socket.gethostname(),
                                       "started": time.time()}))
    temp_dir = Path(tempfile.mkdtemp(prefix="fr-", dir="/tmp"))
    agent = subprocess.Popen([sys.executable, "-c", SLEEPER, str(temp_dir / "session_x")],
                             env={**os.environ, TAG_ENV: temp_dir.name},
                             start_new_session=True)
    cleanup.record(attempt.path, CLEANUP_NAME, CLEANUP_HANDLER, temp_dir=str(temp_dir),
                   tag=temp_dir.name, driver_pid=cell.pid, attempt_folder=str(attempt.path))
    return attempt.path, cell, agent, temp_dir


def test_the_guard_cleans_up_within_seconds_of_its_runners_sigkill(tmp_path):
    run_dir = tmp_path / "runs" / "c"
    run_dir.mkdir(parents=True)
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(run_dir)],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    procs: list[subprocess.Popen] = [runner]
    try:
        runner_pid, guard_pid = map(int, runner.stdout.readline().split())
        attempt_dir, cell, agent, temp_dir = _left_attempt(run_dir, runner_pid)
        procs += [cell, agent]
        scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(runner_pid)))
        (scratch / "inductor").mkdir()
        time.sleep(0.5)  # the guard is up and waiting (its start-up is not what is timed)
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        killed_at = time.monotonic()
        deadline = killed_at + 5.0
        while time.monotonic() < deadline and not (
                _gone(cell.pid) and _gone(agent.pid) and _gone(guard_pid)
                and not temp_dir.exists() and not scratch.exists()):
            time.sleep(0.1)
        assert _gone(cell.pid), "the cell's session outlived its runner by 5 s"
        assert _gone(agent.pid), "a Ray process outlived its runner by 5 s"
        assert not temp_dir.exists() and not scratch.exists()
        assert _gone(guard_pid), "the guard itself stayed"
        record = json.loads((attempt_dir / "cell.pid").read_text())  # left for the next runner
        assert record["guard"]["did"][0] == f"killed pids [{cell.pid}]"
        assert "Ray process" in record["guard"]["did"][1]
        assert not list((attempt_dir / "cleanup").glob("*.json"))  # done: released
        (event,) = [e for e in read_events(run_dir / "runner.jsonl") if e["type"] == "cleanup"]
        assert event["guard"] is True and event["runner_pid"] == runner_pid
        assert f"removed {scratch}" in event["messages"]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_the_next_runner_removes_a_dead_runners_scratch_folders(tmp_path):
    """Where there was no guard to do it (it was killed too): the next runner does."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "c"
    attempt = RunFolder(run_dir).attempt("001-X-seq-p1", "k" * 16, 1)
    attempt.path.mkdir(parents=True)
    attempt.pid.write_text(json.dumps({"pid": dead.pid, "sid": dead.pid,
                                       "runner_pid": dead.pid,
                                       "host": socket.gethostname(), "started": 0}))
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(dead.pid)))
    try:
        (record,) = reap_leftovers(run_dir)
        assert record["attempt_dir"] == attempt.path and not scratch.exists()
    finally:
        if scratch.exists():
            scratch.rmdir()
