"""The events tail every reader uses (the runner's watchdog, the front ends' follower,
replay, report) when the file is damaged under it: a line torn by a full disk, a file cut
mid-line (by an external tool) while its writers keep appending, a file replaced. Each event
is yielded once, nothing written after the damage is lost, and the runner's watchdog keeps
seeing a healthy cell's progress."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from engine.events import EventTail, EventWriter, read_events
from engine.observe.follow import CampaignFollower
from engine.runner.watchdog import Watchdog, WatchdogSettings


def writer(path, n: int = 0, start: int = 0) -> EventWriter:
    """The cell's own writer (append mode, as EventWriter opens it), with ``n`` events."""
    out = EventWriter(path, cell="c", attempt=1)
    for i in range(start, start + n):
        out.emit("job_progress", job_id="j", step=i)
    return out


def steps(events) -> list[int]:
    return [e["step"] for e in events]


def cut(path, keep: int) -> None:
    """Truncate ``path`` to ``keep`` bytes, as ``truncate -s`` or a full disk's tool does."""
    os.truncate(path, keep)


def mid_line(path, line: int) -> int:
    """A byte offset in the middle of line ``line`` (0-based)."""
    data = path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    return starts[line] + 10


def test_file_cut_mid_line_below_the_readers_position(tmp_path):
    path = tmp_path / "events.jsonl"
    out = writer(path, 10)
    tail = EventTail(path)
    assert steps(tail.read()) == list(range(10))
    cut(path, mid_line(path, 6))  # lines 0-5 survive, line 6 is torn
    for i in (10, 11, 12):  # the cell goes on appending (onto the torn fragment first)
        out.emit("job_progress", job_id="j", step=i)
    assert steps(tail.read()) == [10, 11, 12]  # once each, none lost, none repeated
    out.emit("job_progress", job_id="j", step=13)
    assert steps(tail.read()) == [13]


def test_file_cut_then_grown_past_the_readers_position(tmp_path):
    """The file is longer again by the time the reader looks: its size alone cannot tell."""
    path = tmp_path / "events.jsonl"
    out = writer(path, 10)
    tail = EventTail(path)
    assert steps(tail.read()) == list(range(10))
    cut(path, mid_line(path, 3))
    for i in range(10, 30):
        out.emit("job_progress", job_id="j", step=i)
    assert steps(tail.read()) == list(range(10, 30))


def test_file_emptied_and_file_replaced(tmp_path):
    path = tmp_path / "events.jsonl"
    out = writer(path, 5)
    tail = EventTail(path)
    assert steps(tail.read()) == list(range(5))
    cut(path, 0)
    out.emit("job_progress", job_id="j", step=5)
    assert steps(tail.read()) == [5]
    # replaced by a copy that keeps what was there and adds to it (an editor's save)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    writer(copy, 2, start=6).close()
    os.replace(copy, path)
    assert steps(tail.read()) == [6, 7]


def test_line_torn_by_a_full_disk_keeps_the_event_appended_to_it(tmp_path):
    """A write cut short (ENOSPC) leaves a fragment; the next write lands right after it on
    the same line. The whole event is recovered; plain garbage is skipped to the next line."""
    path = tmp_path / "events.jsonl"
    out = writer(path, 2)
    whole = path.read_bytes()
    fragment = whole.splitlines(keepends=True)[1][:25]  # a torn copy of an event
    with open(path, "ab") as fh:
        fh.write(fragment)
    out.emit("job_progress", job_id="j", step=2)
    with open(path, "ab") as fh:
        fh.write(b"not json at all\n")
    out.emit("job_progress", job_id="j", step=3)
    assert steps(read_events(path)) == [0, 1, 2, 3]
    tail = EventTail(path)
    assert steps(tail.read()) == [0, 1, 2, 3]


def test_follower_keeps_following_a_cut_cell_file(tmp_path):
    """The front ends' follower (dashboard, attach) goes through the same tail."""
    run = tmp_path / "run"
    cell_events = run / "cells" / "c" / "attempt-1" / "events.jsonl"
    runner = EventWriter(run / "runner.jsonl", campaign="x")
    out = writer(cell_events, 4)
    runner.emit("cell_started", cell="c", index=1, label="c", attempt=1,
                events=str(cell_events), log_path="", pid=1)
    follower = CampaignFollower(run)
    assert steps(e for e in follower.poll() if e["type"] == "job_progress") == [0, 1, 2, 3]
    cut(cell_events, mid_line(cell_events, 2))
    out.emit("job_progress", job_id="j", step=4)
    assert steps(e for e in follower.poll() if e["type"] == "job_progress") == [4]


@pytest.fixture
def quiet_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    yield proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_watchdog_keeps_seeing_progress_of_a_cut_file(tmp_path, quiet_pid):
    """A healthy cell that uses little CPU and reports every check: an external tool cuts
    its events file mid-line. The runner's tail and watchdog (as Attempt.forward wires them)
    must not lose its progress and must never call it hung."""
    settings = WatchdogSettings(interval_s=0.1, suspect_after=2, hung_after=3)
    path = tmp_path / "events.jsonl"
    out = writer(path, 40)  # a long history: the cut leaves the reader far behind the end
    tail = EventTail(path)
    dog = Watchdog(settings, quiet_pid, quiet_pid)
    states = []
    for i in range(40, 40 + 3 * settings.hung_after):
        if i == 42:
            cut(path, mid_line(path, 5))
        out.emit("job_progress", job_id="j", step=i)
        time.sleep(settings.interval_s)
        for _ in tail.read():
            dog.progress()
        states.append(dog.check().state)
    assert states == ["ok"] * len(states)
