"""The campaign timeline of a stream campaign (issue 51): per job its arrival (``◆``), the
queueing delay up to its admission (``┄``) and its bar to completion (``━``), a key line
saying so. Textual-free checks on the recorded stream (``tests/fixtures/dashboard/
stream_runs``: seq and mp serving six jobs, some of which queue) and on made-up states
(lanes, a cell cut short); then the dashboard, attached to the recording (snapshots at
80x24 and 160x48) and replaying it (seeked to a moment jobs queue, then to the end). A
batch campaign's timeline is unchanged: its snapshots (test_dashboard_timeline.py) pin it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.events import read_events
from engine.observe.state import CampaignState
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.timeline import (
    NO_ROOM,
    CampaignTimeline,
    StreamJob,
    lanes,
    render,
    stream_jobs,
)
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.report.charts import JOB_KEY
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import FIXTURES, await_snapshot, install

#: The recording's arrivals, seconds after each cell's window opened (its trace.csv).
ARRIVALS = [0.5, 1.0, 1.5, 7.0, 7.5, 13.0]


def recorded(tmp_path) -> list:
    run = install(tmp_path, "stream_runs") / "stream"
    events = list(read_events(run / "runner.jsonl"))
    for path in sorted(run.glob("cells/*/*/events.jsonl")):
        events += list(read_events(path))
    return sorted(events, key=lambda e: e["ts"])


def fold(events, until_ts: float | None = None) -> tuple[CampaignState, CampaignTimeline]:
    state, timeline = CampaignState(), CampaignTimeline()
    for event in events:
        if until_ts is not None and event["ts"] > until_ts:
            break
        state.apply(event)
        timeline.add(event)
    return state, timeline


def test_the_recorded_stream_places_every_job_and_draws_the_queue(tmp_path):
    events = recorded(tmp_path)
    state, timeline = fold(events)
    start = state.started_ts
    jobs = stream_jobs(state, start, state.ended_ts)
    assert len(jobs) == 12 and all(j.completed and not j.failed for j in jobs)
    for cell in state.cells.values():
        [opened] = [e for e in events if e["type"] == "phase" and e.get("cell") == cell.key
                    and e["phase"] == "group_start"]
        assert [at - opened["ts"] for at in cell.arrivals.values()] == pytest.approx(ARRIVALS)
    # admitted never before arrival (to the ms the window opens after group_start), and
    # under seq the 2nd and 3rd job waited for the one before
    assert all(j.admitted is not None and j.admitted >= j.arrival - 0.05 for j in jobs)
    seq = [j for j in jobs if j.job_id in next(iter(state.cells.values())).arrivals]
    assert seq[2].admitted - seq[2].arrival > seq[1].admitted - seq[1].arrival > 0.5
    text = render(timeline, state, state.ended_ts, 80, 20, color=False)
    lines = text.splitlines()
    assert "stream jobs of 2 cells: 12 done, 0 running, 0 queued" in text  # 6 each
    assert JOB_KEY in lines
    assert "◆┄" in text and "┄━" in text  # an arrival, its wait, then its bar
    assert lines[-1].startswith("1 stream seq pass 1 0:") and "2 stream mp pass 1" in lines[-1]
    assert len(lines) <= 20 and max(len(line) for line in lines) <= 80
    assert "cells' CPU % of a core  last" in text  # the monitor's panel stays above


def test_live_the_queue_grows_to_now_and_no_arrival_is_drawn_ahead(tmp_path):
    events = recorded(tmp_path)
    start = events[0]["ts"]
    state, timeline = fold(events, start + 4.5)  # the seq cell: one runs, two wait
    now = start + 4.5
    jobs = stream_jobs(state, start, now)
    assert [(j.admitted is not None, j.completed) for j in jobs] == [
        (True, False), (False, False), (False, False)]
    assert all(j.end == pytest.approx(4.5) for j in jobs)  # drawn up to now
    text = render(timeline, state, now, 100, 30, color=False)
    assert "stream jobs: 0 done, 1 running, 2 queued" in text
    rows = [line for line in text.splitlines() if "◆" in line and line.startswith("│")]
    assert len(rows) == 3 and sum(line.count("◆") for line in rows) == 3
    # the two waiting jobs' queue reaches the right edge of the chart: now
    assert all(line.rstrip("│ ").endswith("┄") for line in rows[1:])


def _job(name: str, arrival: float, end: float) -> StreamJob:
    return StreamJob(name, arrival, arrival, end, True)


def test_lanes_first_fit_with_a_gap_and_say_who_found_none():
    jobs = [_job("a", 0, 2), _job("b", 1, 3), _job("c", 2.5, 4), _job("d", 3.05, 5),
            _job("e", 3.5, 6)]
    # c fits after a (ended 2 < 2.5 - gap); d does not fit after b (3 + 0.1 > 3.05)
    assert lanes(jobs, 0.1, 5) == ([0, 1, 0, 2, 1], 3)
    assert lanes(jobs, 0.1, 2) == ([0, 1, 0, None, 1], 2)


def test_a_cell_cut_short_ends_its_jobs_there_and_counts_them(tmp_path):
    """A stream cell killed while one job runs and one waits: their marks stop at the
    kill, they are counted as cut, and the arrivals after it never happened."""
    base = {"v": 1, "campaign": "c"}
    events = [
        {**base, "ts": 100.0, "type": "campaign_started", "cells": 1, "run_dir": "x",
         "device": "cpu", "runner_pid": 1, "resume": False},
        {**base, "ts": 100.0, "type": "cell_started", "cell": "k", "index": 1,
         "label": "stream seq pass 1", "attempt": 1, "events": "", "log_path": "", "pid": 2},
        {"v": 1, "ts": 101.0, "type": "started", "cell": "k", "attempt": 1, "pid": 2,
         "exp_id": "stream", "executor": "seq", "jobs": ["j0", "j1", "j2"]},
        {"v": 1, "ts": 102.0, "type": "phase", "cell": "k", "attempt": 1,
         "phase": "group_start", "arrivals": [0.0, 1.0, 30.0]},
        {"v": 1, "ts": 102.0, "type": "job_started", "cell": "k", "attempt": 1,
         "job_id": "j0"},
        {**base, "ts": 110.0, "type": "killed", "cell": "k", "attempt": 1,
         "reason": "control"},
        {**base, "ts": 111.0, "type": "campaign_done", "ok": False, "exit_code": 1,
         "failed": 1},
    ]
    state, timeline = fold(events)
    jobs = stream_jobs(state, 100.0, 140.0)
    assert [(j.job_id, j.end, j.cut) for j in jobs] == [("j0", 10.0, True),
                                                        ("j1", 10.0, True)]
    timeline.add({"v": 1, "ts": 103.0, "type": "sample", "cell": "k", "attempt": 1,
                  "time": 103.0, "cpu_pct": 90.0, "rss_mib": 200.0})
    text = render(timeline, state, 140.0, 80, 24, color=False)
    assert "stream jobs: 0 done, 0 running, 0 queued, 2 cut by their cell's end" in text


def test_a_batch_campaign_has_no_stream_jobs():
    from engine.observe.state import rebuild

    state = rebuild(FIXTURES / "runs" / "speed")
    assert state.cells and stream_jobs(state, state.started_ts or 0.0, 1e12) == []


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "no-data").mkdir()
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_attached_the_timeline_shows_the_streams_jobs(tmp_path, pinned, size):
    run = install(tmp_path, "stream_runs") / "stream"
    last = max(e["ts"] for e in read_events(run / "runner.jsonl"))

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: last + 10)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and app.screen.query_one(CellTable).row_count == 2
                        and "p95 job completion so far" in screen_text(app), timeout=20,
                        what="the 2 cells and the header's completion times")
            await pilot.press("t")
            await until(pilot, lambda: "stream jobs of 2 cells: 12 done, 0 running, 0 queued"
                        in screen_text(app) and JOB_KEY in screen_text(app),
                        what="the stream's jobs and their key")
            text = screen_text(app)
            assert "◆┄" in text and "cells' CPU % of a core" in text
            assert "1 stream seq pass 1 0:" in text  # the cells' legend, under the key
            await await_snapshot(pilot, app, f"run_stream_timeline_{size[0]}x{size[1]}", tmp_path)

    asyncio.run(scenario())


def test_in_replay_the_jobs_follow_the_replay_clock(tmp_path, pinned):
    run = install(tmp_path, "stream_runs") / "stream"

    async def scenario():
        from fugue_tui.app.screens.replay_seek import SeekScreen

        app = FugueApp(runs_dir=str(run.parent))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.open_replay(run, paused=True)
            await until(pilot, lambda: app.screen is screen, what="the replay")
            await pilot.press("T")
            await until(pilot, lambda: isinstance(app.screen, SeekScreen), what="the prompt")
            await pilot.press(*"0:05", "enter")  # the seq cell: one done, one runs, one waits
            await until(pilot, lambda: app.screen is screen and screen.replay.pos > 0,
                        what="the seek")
            # (the timeline after the seek: a redraw of it is held for its rate limit)
            await pilot.press("t")
            await until(pilot, lambda: "stream jobs: 1 done, 1 running, 1 queued"
                        in screen_text(app), timeout=20, what="the queue at 0:05")
            text = screen_text(app)
            # a 13-row pane: the jobs take it, a line says where the monitor's panels went
            assert "◆┄" in text and NO_ROOM in text
            # the mp cell's jobs have not arrived at 0:05: three arrivals only
            assert sum(line.count("◆") for line in text.splitlines()) == 3 + 1  # + the key

    asyncio.run(scenario())


def test_a_finished_campaigns_timeline_is_drawn_again_when_its_pane_resizes(tmp_path, pinned):
    """A finished campaign's screen has no tick that redraws the monitor pane: drawn at one
    height and then made shorter by the layout (the header gained a line: its speedups so
    far, which a worker computes), it kept its old drawing, the last lines (the cells'
    legend) cut off. Its resize now redraws it."""
    run = install(tmp_path, "stream_runs") / "stream"
    last = max(e["ts"] for e in read_events(run / "runner.jsonl"))

    async def scenario():
        from fugue_tui.app.widgets.device_charts import DeviceCharts
        from fugue_tui.app.widgets.run_header import RunHeader

        app = FugueApp(attach=str(run), clock=lambda: last + 10)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and "p95 job completion so far" in screen_text(app), timeout=20,
                        what="the header's completion times")
            await pilot.press("t")
            await until(pilot, lambda: "1 stream seq pass 1 0:" in screen_text(app),
                        what="the timeline and the cells' legend")
            charts = app.screen.query_one(DeviceCharts)
            header = app.screen.query_one(RunHeader)
            rows = charts.size.height
            header.styles.height = header.size.height + 1  # as when it gains a line
            await until(pilot, lambda: charts.size.height == rows - 1
                        and "1 stream seq pass 1 0:" in screen_text(app),
                        what="the timeline drawn again for one row less")

    asyncio.run(scenario())


def test_the_cells_legend_takes_the_rows_the_jobs_chart_left_blank(tmp_path):
    """At 40x15 the legend had one line (``… +1 more``) while five rows below the jobs'
    chart stayed blank: it now names both cells in them."""
    state, timeline = fold(recorded(tmp_path))
    lines = render(timeline, state, state.ended_ts, 40, 15, color=False).splitlines()
    assert len(lines) <= 15 and not any("more" in line for line in lines)
    assert lines[-2].startswith("1 stream seq pass 1") and lines[-1].startswith("2 stream mp")


def test_a_stream_cells_waiting_jobs_say_when_they_arrive_or_since_when_they_queue(tmp_path):
    """Two seconds into seq's stream: job 1 runs, jobs 2 and 3 arrived and queue behind it,
    4-6 are due (arrivals 7, 7.5 and 13 s); all said ``waiting`` before."""
    import io

    from rich.console import Console

    from fugue_tui.live.job_table import job_rows

    events = recorded(tmp_path)
    seq = next(e["cell"] for e in events if e["type"] == "phase" and e["phase"] == "group_start")
    [opened] = [e["ts"] for e in events if e["type"] == "phase" and e.get("cell") == seq
                and e["phase"] == "group_start"]
    state, _ = fold(events, opened + 2.0)
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(job_rows(state.cells[seq], opened + 2.0, 20, True))
    lines = [line for line in console.file.getvalue().splitlines() if "_s" in line]
    assert len(lines) == 6 and "waiting" not in "".join(lines)
    assert all("queued" in line and "arrived 0:0" in line for line in lines[1:3]), lines
    assert [line.split("arrives in ")[1].split()[0] for line in lines[3:]] == [
        "0:05", "0:06", "0:11"], lines
