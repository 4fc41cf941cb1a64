"""Each ``cluster = "local"`` runner left a ``cluster-local-<pid>/`` folder in the run
folder (issue 43). The next runner stops what a dead one's folder records and removes the
folder; a record whose stop failed keeps it (for a later runner to try again). Real
folders and a real (finished) process recorded by pid and start time."""

from __future__ import annotations

import subprocess
import sys

import psutil

from engine import cleanup
from engine.runner.cluster import LOCAL_PREFIX, clean_local_runtimes


def test_an_earlier_runners_local_folder_is_removed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = psutil.Process(proc.pid).create_time()
    left = tmp_path / f"{LOCAL_PREFIX}{proc.pid + 100000}"  # a runner that died
    cleanup.record(left, "processes", "engine.runner.agent:stop_processes",
                   processes=[(proc.pid, started)])
    (left / "ray.log").write_text("what its runtime wrote")
    empty = tmp_path / f"{LOCAL_PREFIX}1"  # one whose runtime was stopped, folder left
    empty.mkdir()
    stuck = tmp_path / f"{LOCAL_PREFIX}2"  # a record whose handler fails: kept
    cleanup.record(stuck, "processes", "engine.runner.nowhere:stop", processes=[])

    messages = clean_local_runtimes(tmp_path)

    assert proc.wait(timeout=10) is not None  # what the dead runner's folder recorded: stopped
    assert not left.exists() and not empty.exists()
    assert stuck.exists() and any((stuck / "cleanup").glob("*.json"))
    assert sum("removed" in m for m in messages) == 2, messages


def test_a_cluster_attempt_that_never_started_leaves_no_empty_files(tmp_path):
    """Its row and the runner's event say why; 0-byte cell.log/events.jsonl said nothing
    more (issue 43). A file the attempt did write (a line already) stays. Built without a
    cluster: only the attempt's two paths matter here."""
    from types import SimpleNamespace

    from engine.runner.cluster_attempt import NEVER_STARTED, ClusterAttempt

    attempt = object.__new__(ClusterAttempt)
    attempt.log_path = tmp_path / "cell.log"
    attempt.spec = SimpleNamespace(events=str(tmp_path / "events.jsonl"))
    attempt.log_path.touch()
    (tmp_path / "events.jsonl").touch()
    attempt._drop_empty_files()
    assert not attempt.log_path.exists() and not (tmp_path / "events.jsonl").exists()
    attempt.log_path.write_text("agent: placing\n")
    (tmp_path / "events.jsonl").touch()
    attempt._drop_empty_files()
    assert attempt.log_path.read_text() == "agent: placing\n"
    assert "--resume" in NEVER_STARTED
