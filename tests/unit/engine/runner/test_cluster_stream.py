"""What a node's agent sends and the head writes (issue 28), without Ray: rows arrive as
complete CSV lines (the header with the first batch) and enter the results file through
the locked append; events and log extend the attempt's files; files the cell wrote whole
land under the runs folder and nowhere else."""

from __future__ import annotations

from types import SimpleNamespace

from engine.results.columns import GROUPS_FILE, header
from engine.results.read import read_rows
from engine.runner.cluster import RemoteCell
from engine.runner.journal import Journal


def _attempt(tmp):
    runs = tmp / "runs"
    runs.mkdir()
    attempt_dir = runs / "c" / "cells" / "001" / "attempt-1"
    attempt_dir.mkdir(parents=True)
    # the head's journal: the rows go through its locked append, repairs become warnings
    journal = Journal(runs, "c", on_event=lambda event: None)
    journal.open(runs / "c" / "runner.jsonl")
    return SimpleNamespace(journal=journal, settings=SimpleNamespace(runs_dir=runs),
                           cell=SimpleNamespace(key="k"), number=1, dir=attempt_dir,
                           spec=SimpleNamespace(events=str(attempt_dir / "events.jsonl")),
                           log_path=attempt_dir / "cell.log")


def test_rows_events_log_and_files_enter_the_heads_run_folder(tmp_path):
    attempt = _attempt(tmp_path)
    remote = RemoteCell(attempt, agent=None, pid=1, node="n 1")
    cols = header(GROUPS_FILE)
    head_line = ",".join(cols) + "\n"
    row = {c: "" for c in cols} | {"cell_key": "k", "status": "ok", "node": "n 1",
                                   "timestamp": "2026-12-02T00:00:00"}
    line = ",".join(row[c] for c in cols) + "\n"
    remote.apply({"rows": {GROUPS_FILE: head_line + line}, "events": ['{"v":1}'],
                  "log": "hello\n", "files": {"samples/g.csv": b"t,v\n0,1\n",
                                              "../escape.txt": b"no"},
                  "attempt_files": {"stacks/123.txt": b"Thread 1", "../../x": b"no"}})
    remote.apply({"rows": {GROUPS_FILE: line}, "events": [],
                  "log": "again\n"})
    rows = read_rows(attempt.settings.runs_dir / GROUPS_FILE)
    assert [(r["cell_key"], r["status"], r["node"]) for r in rows] == [("k", "ok", "n 1")] * 2
    assert (attempt.log_path).read_text() == "hello\nagain\n"
    assert (tmp_path / "runs" / "c" / "cells" / "001" / "attempt-1" / "events.jsonl"
            ).read_text() == '{"v":1}\n'
    assert (tmp_path / "runs" / "samples" / "g.csv").read_bytes() == b"t,v\n0,1\n"
    assert not (tmp_path / "escape.txt").exists()
    assert (attempt.dir / "stacks" / "123.txt").read_bytes() == b"Thread 1"
    assert not (attempt.dir.parent.parent / "x").exists()


def test_a_column_the_head_does_not_know_is_dropped_not_fatal(tmp_path):
    attempt = _attempt(tmp_path)
    remote = RemoteCell(attempt, agent=None, pid=1, node="n")
    remote.apply({"rows": {GROUPS_FILE: "cell_key,status,from_a_newer_node\nk,ok,x\n"}})
    rows = read_rows(attempt.settings.runs_dir / GROUPS_FILE)
    assert rows[0]["cell_key"] == "k" and "from_a_newer_node" not in rows[0]
