"""engine.observe.follow: an ended attempt's events file is no longer read at every poll
(issue 47, item 2: the dashboard's follower read every attempt's file ever started, four
times a second, so its cost grew with the campaign)."""

from __future__ import annotations

from engine.events import EventWriter
from engine.observe.follow import CampaignFollower


def test_a_poll_reads_the_running_attempt_not_every_ended_one(tmp_path):
    now = [0.0]
    runner = EventWriter(tmp_path / "runner.jsonl", campaign="x")
    follower = CampaignFollower(tmp_path, retire_after_s=5.0, clock=lambda: now[0])
    for i in range(20):  # twenty cells, one after another
        events = tmp_path / "cells" / f"c{i}" / "attempt-1" / "events.jsonl"
        cell = EventWriter(events, cell=f"c{i}", attempt=1)
        runner.emit("cell_started", cell=f"c{i}", index=i + 1, label=f"c{i}", attempt=1,
                    events=str(events), log_path="", pid=1)
        cell.emit("job_progress", job_id="j", step=i)
        got = follower.poll()
        assert [e["step"] for e in got if e["type"] == "job_progress"] == [i]
        cell.emit("job_progress", job_id="j", step=100 + i)  # last words, then the end
        runner.emit("done", cell=f"c{i}", attempt=1, T_group=1.0)
        got = follower.poll()
        assert [e["type"] for e in got][-2:] == ["job_progress", "done"]
        now[0] += 3.0
    before = follower.reads
    follower.poll()
    # the cells that ended more than 5 s ago and wrote nothing since are read no more
    assert follower.reads - before <= 2
    assert len(follower.cells) <= 2
