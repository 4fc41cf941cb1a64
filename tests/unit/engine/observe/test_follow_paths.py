"""engine.observe.follow: an attempt's files are found from any working directory.

A runner records ``cell_started``'s ``events`` and ``log_path`` as it opened them: relative
to its own working directory when the campaign's ``runs_dir`` is relative, so ``--attach``
from another folder found no cell events; an absolute record names where a moved or copied
run folder was. The follower resolves them against the run folder
(:meth:`engine.runfolder.RunFolder.recorded`). (A real run was checked by hand: see the
branch's report.)"""

from __future__ import annotations

import os

from engine.events import EventWriter
from engine.observe.follow import CampaignFollower
from engine.runfolder import RunFolder


def _run(base, events_text, log_text):
    """A run folder ``base/runs/c`` as a runner in ``base`` writes it, with the paths it
    recorded given as text."""
    run = base / "runs" / "c"
    attempt = run / "cells" / "001-D_ens-seq-p1-abcd1234" / "attempt-1"
    runner = EventWriter(run / "runner.jsonl", campaign="c")
    runner.emit("cell_started", cell="k", index=1, label="D_ens seq", attempt=1,
                events=events_text, log_path=log_text, pid=1)
    EventWriter(attempt / "events.jsonl", cell="k", attempt=1).emit(
        "job_progress", job_id="j", step=7)
    (attempt / "cell.log").write_text("hello\n")
    runner.emit("done", cell="k", attempt=1, T_group=1.0)
    return run, attempt


def _steps_and_log(run):
    got = CampaignFollower(run).poll()
    steps = [e["step"] for e in got if e["type"] == "job_progress"]
    started = next(e for e in got if e["type"] == "cell_started")
    return steps, started["log_path"]


def test_a_runs_dir_relative_to_the_runner_is_followed_from_another_directory(
        tmp_path, monkeypatch):
    rel = "runs/c/cells/001-D_ens-seq-p1-abcd1234/attempt-1"
    run, attempt = _run(tmp_path / "here", f"{rel}/events.jsonl", f"{rel}/cell.log")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    steps, log = _steps_and_log(os.path.relpath(run))
    assert steps == [7]
    assert open(log).read() == "hello\n"  # the run screen's log pane reads this path


def test_a_moved_run_folder_is_followed_where_it_is_now(tmp_path):
    old = tmp_path / "old" / "runs" / "c" / "cells" / "001-D_ens-seq-p1-abcd1234" / "attempt-1"
    run, attempt = _run(tmp_path / "new", str(old / "events.jsonl"), str(old / "cell.log"))
    steps, log = _steps_and_log(run)
    assert steps == [7]
    assert log == str(attempt / "cell.log")


def test_recorded_paths_kept_when_they_exist_and_relative_ones_read_in_the_run(tmp_path):
    folder = RunFolder(tmp_path / "run")
    real = tmp_path / "elsewhere.jsonl"
    real.write_text("")
    assert folder.recorded(str(real)) == real  # an absolute path that exists: as is
    assert folder.recorded("notes/x.txt") == tmp_path / "run" / "notes" / "x.txt"
    assert folder.recorded("a/cells/b/cells/c/attempt-1/events.jsonl") == \
        tmp_path / "run" / "cells" / "c" / "attempt-1" / "events.jsonl"
