"""Dashboard bugs of issue 30, each pinned by a Pilot test that failed before its fix: the
events pane hid the newest lines, a replay skipped watchdog states, the note column never
widened, a finished cell's job-pane header counted to now, the monitor charts' axes and
"now", lost keystrokes under preview refreshes, and the small ones (stop reason, palette
names, escape, replay ladder, campaign type errors)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.job_progress import JobProgress
from tests.app_screen import screen_text, until
from tests.unit.test_app_run_screen import T0, _write, recorded_run

SIZE = (150, 48)


def _run_screen(app) -> RunScreen | None:
    return app.screen if isinstance(app.screen, RunScreen) else None


def test_events_pane_shows_the_newest_lines(tmp_path, monkeypatch):
    """The recent events pane is shorter than the lines kept: the newest must be the ones
    shown (the pane showed the oldest and cut the last 1-2), at every supported size."""
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario(size):
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=size) as pilot:
            screen = await until(pilot, lambda: _run_screen(app)
                                 and app.screen.query_one(CellTable).row_count == 3
                                 and app.screen)
            await until(pilot, lambda: "campaign finished" in screen_text(app),
                        what=f"the newest event at {size}")
            assert len(screen.view.recent) > 4  # more than the pane shows at 80x24

    for size in (SIZE, (80, 24)):
        asyncio.run(scenario(size))


def test_finished_cell_job_header_shows_its_own_duration(tmp_path, monkeypatch):
    """D_ens ran from +26 s to +31 s: 0:05, however late the screen is looked at."""
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 3600)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: _run_screen(app)
                                 and app.screen.query_one(CellTable).row_count == 3
                                 and app.screen)
            await pilot.press("G")  # the last row: D_ens
            jobs = screen.query_one(JobProgress)
            await until(pilot, lambda: "D_ens seq pass 1" in str(jobs.render()), what="D_ens")
            header = str(jobs.render()).splitlines()[0]
            assert "· 0:05 ·" in header, header
            assert "0:59" not in header and "1:00:" not in header

    asyncio.run(scenario())


def test_note_column_widens_for_a_note_that_comes_later(tmp_path, monkeypatch):
    """A row added with no note, then the watchdog's long note: the column grows to it."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "live"
    attempt = run / "cells" / "001-D_ens-seq-p1-cccccccc" / "attempt-1"
    _write(attempt / "events.jsonl", [{"ts": T0 + 1, "type": "started", "cell": "c" * 16,
                                       "attempt": 1, "jobs": ["D_ens_s0"]}])

    def runner(kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "campaign": "live", **fields}

    label = "D_ens seq pass 1"
    _write(run / "runner.jsonl", [
        runner("campaign_started", 0, cells=1, device="cpu", run_dir=str(run), runner_pid=1,
               resume=False),
        runner("queued", 0, cell="c" * 16, index=1, label=label),
        runner("cell_started", 1, cell="c" * 16, index=1, label=label, attempt=1,
               events=str(attempt / "events.jsonl"), log_path=str(attempt / "cell.log"),
               pid=2)])
    seen = "3 checks without progress (no job_progress, 45 s)"

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 50)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: _run_screen(app)
                                 and app.screen.query_one(CellTable).row_count == 1
                                 and app.screen)
            await pilot.pause(0.5)
            _write(run / "runner.jsonl", [runner("suspect", 40, cell="c" * 16, attempt=1,
                                                 seen=seen)])
            table = screen.query_one(CellTable)
            await until(pilot, lambda: "suspect" in str(table.get_row_at(0)[4]), what="suspect")
            await pilot.pause(0.3)
            assert table.columns["note"].content_width >= len(seen)
            await until(pilot, lambda: seen in screen_text(app), what="the whole note")

    asyncio.run(scenario())


def test_replay_shows_the_watchdog_states_when_they_happened(tmp_path, monkeypatch):
    """X_block was suspect from +8 s and hung from +10 s while its monitor sampled on to
    +19 s: a replay at +9 s shows it suspect, at +15 s hung (both were skipped: the runner's
    events came out after the cell's block, with the kill)."""
    from fugue_tui.app.replay import Replay

    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)
    # a hung cell's monitor goes on sampling: its own events run past the watchdog's
    attempt = run / "cells" / "001-X_block-seq-p1-aaaaaaaa" / "attempt-1"
    _write(attempt / "events.jsonl", [
        {"ts": T0 + dt, "type": "sample", "cell": "a" * 16, "attempt": 1, "t": 50.0 + dt,
         "cpu_pct": 0.0, "rss_mib": 300.0} for dt in range(3, 20)])
    wall = [0.0]
    replay, _ = Replay.open(run, speed=1.0, wall=lambda: wall[0])

    async def scenario():
        app = FugueApp()
        async with app.run_test(size=SIZE) as pilot:
            screen = RunScreen(run, None, 0, replay=replay)
            await app.push_screen(screen)
            table = screen.query_one(CellTable)
            for at, state, note in ((9.0, "suspect", "2 checks without progress"),
                                    (15.0, "hung", "4 checks without progress")):
                wall[0] = at
                await until(pilot, lambda: table.row_count and str(table.get_row_at(0)[4])
                            == state, what=f"{state} at +{at} s")
                assert note in screen_text(app)

    asyncio.run(scenario())
