"""Dashboard bugs of issue 30, each pinned by a Pilot test that failed before its fix: the
events pane hid the newest lines, a replay skipped watchdog states, the note column never
widened, a finished cell's job-pane header counted to now, the monitor charts' axes and
"now", lost keystrokes under preview refreshes, and the small ones (stop reason, palette
names, escape, replay ladder, campaign type errors)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.job_progress import JobProgress
from tests.app_screen import screen_text, until
from tests.unit.fugue_tui.app.test_app_run_screen import T0, _write, recorded_run

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
            assert "· cell 0:05 ·" in header, header
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
    from fugue_tui.app.models.replay import Replay

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
                await until(pilot, lambda state=state: table.row_count
                            and str(table.get_row_at(0)[4]) == state, what=f"{state} at +{at} s")
                assert note in screen_text(app)

    asyncio.run(scenario())


def test_monitor_axes_start_at_zero_with_round_plain_ticks():
    """One sample: a 0..1 s axis, not -1..1; a flat or short series: round, evenly spaced,
    plain y ticks (plotext wrote 96.0 / 95.5 / 94.0 for even rows, and 4.8e2 style)."""
    import re

    from fugue_tui.report.charts import metric_panels, nice_ticks

    one = metric_panels([100.0], [("CPU %", [95.0])], width=50, height=8, color=False)
    assert "-" not in one.replace("─", "") and "0.0s" in one and "1.0s" in one
    ticks = [int(t) for t in re.findall(r"^\s*(\d+)┤", one, re.M)]
    assert ticks == [100, 95, 90]
    many = metric_panels([float(i) for i in range(30)], [("RSS", [480 + i for i in range(30)])],
                         width=50, height=8, color=False, latest="last")
    assert "RSS  last 509" in many and "e+" not in many and "20s" in many
    assert nice_ticks(0.0012, 0.0049, 3, cover=True) == ([0.0, 0.005], ["0.000", "0.005"])
    assert nice_ticks(13_950, 15_020, 3, cover=True) == ([12_000, 14_000, 16_000],
                                                         ["12,000", "14,000", "16,000"])


def test_a_finished_cells_monitor_reads_last_not_now(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: _run_screen(app)
                        and app.screen.query_one(CellTable).row_count == 3)
            await pilot.press("g", "j")  # X_block's second attempt (it has the samples)
            await until(pilot, lambda: "last 97.5" in screen_text(app), what="last 97.5")
            assert "now 97.5" not in screen_text(app)

    asyncio.run(scenario())


def test_palette_names_escape_and_f4_on_a_live_campaign(tmp_path, monkeypatch):
    """The run screen's palette has no two entries of one name (two were "results"); Escape
    closes a replay (nothing but "p · plan" did); F4 on the folder of a campaign still
    running refuses to replay it, F4 on an ended one offers that folder."""
    import fugue_tui.app.app as app_module
    from fugue_tui.app.process import RunnerHandle
    from fugue_tui.app.screens.modals import PathScreen
    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen))
            screen = app.open_replay(run)
            await until(pilot, lambda: app.screen is screen
                        and screen.query(CellTable) and screen.query_one(CellTable).row_count)
            titles = [c.title for c in app.get_system_commands(screen)]
            assert len(titles) == len(set(titles)), titles
            assert "all results" in titles and "campaign results" in titles
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="back")
            # an ended campaign on screen: F4 offers its folder
            app.attach(run)
            await until(pilot, lambda: _run_screen(app) and app.screen.runner_alive is False)
            await pilot.press("f4")
            await until(pilot, lambda: isinstance(app.screen, PathScreen), what="F4's dialog")
            from textual.widgets import Input
            assert app.screen.query_one(Input).value == str(run)
            await pilot.press("escape")
            # the same folder while its runner is alive: refused, no replay screen
            monkeypatch.setattr(app_module, "find_runner",
                                lambda path: RunnerHandle(Path(path), 4242))
            stack = len(app.screen_stack)
            assert app.open_replay(run) is None
            await pilot.pause(0.2)
            assert len(app.screen_stack) == stack
            assert any("still running (runner pid 4242)" in str(n.message)
                       for n in app._notifications)

    asyncio.run(scenario())


def test_replay_speed_ladder_and_bad_speeds():
    import argparse

    import pytest

    from fugue_tui.app.models.replay import SPEEDS, Replay, parse_speed

    ratios = [b / a for a, b in zip(SPEEDS, SPEEDS[1:], strict=False)]
    assert all(2.0 <= r <= 2.5 for r in ratios), ratios  # no 100 -> 500 jump
    replay = Replay([{"type": "a", "ts": 1.0}], speed=3.0)  # off the ladder: back onto it
    assert replay.set_speed(True) == 5.0
    replay = Replay([{"type": "a", "ts": 1.0}], speed=3.0)
    assert replay.set_speed(False) == 2.0
    replay = Replay([{"type": "a", "ts": 1.0}], speed=1000.0)
    assert replay.set_speed(True) == 1000.0 and "1000× (fastest)" in replay.status()
    assert parse_speed("10") == 10.0
    for bad in ("0", "-5", "nan", "inf", "fast", "5000"):
        with pytest.raises(argparse.ArgumentTypeError, match="replay speed must be"):
            parse_speed(bad)


def test_ctrl_o_lists_every_type_error_with_its_line(tmp_path, monkeypatch):
    from textual.widgets import Input, Static

    from fugue_tui.app.screens.modals import PathScreen
    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nexperiments = ["D_ens"]\npasses = "two"\nseed = 1.5\n\n'
                   '[watchdog]\ninterval_s = "often"\n')

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen))
            plan = app.screen
            await pilot.press("ctrl+o")
            await until(pilot, lambda: isinstance(app.screen, PathScreen), what="the dialog")
            app.screen.query_one(Input).value = str(bad)
            await pilot.press("enter")
            await until(pilot, lambda: plan.load_error, what="the load error")
            error = plan.load_error
            assert f"{bad}:3: key 'passes' must be an integer, got 'two'" in error
            assert f"{bad}:4: key 'seed' must be an integer, got 1.5" in error
            assert f"{bad}:7: watchdog: key 'interval_s' must be a number" in error
            summary = str(plan.query_one("#preview-summary", Static).render())
            assert "3 problems" in summary

    asyncio.run(scenario())


def test_abort_carries_who_stopped_the_campaign(tmp_path):
    """The dashboard's Stop aborts through the control folder with its reason (the runner
    records the running cell as killed for it, not as an "interrupted (Ctrl-C)")."""
    import time

    from engine.runner.control import Inbox, send
    from fugue_tui.app.process import STOP_REASON

    (tmp_path / "runner.jsonl").write_text("")
    inbox = Inbox(tmp_path, since=time.time() - 1)
    send(tmp_path, "abort", reason=STOP_REASON)
    send(tmp_path, "kill", "1", reason="ignored for a kill")
    commands = inbox.poll()
    assert commands[0]["reason"] == "stopped from the dashboard"
    assert "reason" not in commands[1]


def test_typing_into_every_plan_field_under_preview_refreshes_loses_nothing(tmp_path,
                                                                            monkeypatch):
    """Every text field of the plan form, typed into key by key (no pause) while each key
    re-runs the preview: the field holds exactly what was typed."""
    from textual.widgets import Input

    from fugue_tui.app.screens.plan import PlanScreen
    from fugue_tui.app.widgets.campaign_form import CampaignForm

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen)
                        and "D_reg" in screen_text(app), timeout=20, what="the catalogue")
            plan = app.screen
            await pilot.press("a")  # a preview with cells: each refresh rebuilds its table
            await until(pilot, lambda: plan.result is not None and plan.result.cells,
                        what="the preview")
            form = plan.query_one(CampaignForm)
            for box in form.query(Input):
                if box.id in ("f-runs-dir", "f-experiments-file"):
                    continue  # a new catalogue or runs folder: typed below, once
                # q quits the app (a priority binding), a and space are plan keys: each
                # must type into every text field; one field gets every key a plan screen
                # binds (the keys are the screen's, not the field's: one field shows them
                # all, and each key re-runs the preview, the cost of this test)
                text = {"integer": "12", "number": "2.5"}.get(box.type, "q a")
                if box.id == "f-name":
                    text = "quick-acjkgG q?/_.~"
                elif box.id.startswith("opt-"):
                    text = "3"
                box.focus()
                await pilot.pause()
                box.value = ""
                await pilot.press(*text)
                await until(pilot, lambda box=box, text=text: box.value == text, timeout=5,
                            what=f"{box.id} to hold {text!r} (has {box.value!r})")
            for field, text in (("#f-runs-dir", "runs/quick"),
                                ("#f-experiments-file", "my/catalogue.toml")):
                box = form.query_one(field, Input)
                box.focus()
                await pilot.pause()
                box.value = ""
                await pilot.press(*text)
                await until(pilot, lambda box=box, text=text: box.value == text, timeout=5,
                            what=f"{field} (has {box.value!r})")
                assert app.focused is box

    asyncio.run(scenario())


def test_d_dumps_the_running_cells_stacks_with_its_tree_and_last_events(tmp_path,
                                                                          monkeypatch):
    """A live cell process (registered like the engine's: engine.stacks.install): `d` asks
    it for its stacks without stopping it, and shows them with its process tree and its
    last events."""
    import os
    import subprocess
    import sys
    import time

    from engine.stacks import STACKS_ENV
    from fugue_tui.app.screens.modals import StackScreen

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "live"
    attempt = run / "cells" / "001-D_ens-seq-p1-dddddddd" / "attempt-1"
    (attempt / "stacks").mkdir(parents=True)
    repo = Path(__file__).resolve().parents[4]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from engine import stacks; stacks.install('cell')\n"
         "import time\ndef training_step():\n    time.sleep(60)\ntraining_step()\n"],
        env={**os.environ, STACKS_ENV: str(attempt / "stacks"), "PYTHONPATH": str(repo)},
        start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not list((attempt / "stacks").glob("cell-*.txt")):
            assert time.monotonic() < deadline, "the cell never registered"
            time.sleep(0.05)
        key, label = "d" * 16, "D_ens seq pass 1"
        _write(attempt / "events.jsonl", [
            {"ts": T0 + 1, "type": "started", "cell": key, "attempt": 1, "jobs": ["D_ens_s0"]},
            {"ts": T0 + 2, "type": "job_progress", "cell": key, "attempt": 1,
             "job_id": "D_ens_s0", "epoch": 1, "epochs": 3, "step": 4, "steps": 9}])
        _write(run / "runner.jsonl", [
            {"ts": T0, "type": "campaign_started", "campaign": "live", "cells": 1,
             "device": "cpu", "run_dir": str(run), "runner_pid": 1, "resume": False},
            {"ts": T0, "type": "queued", "campaign": "live", "cell": key, "index": 1,
             "label": label},
            {"ts": T0 + 1, "type": "cell_started", "campaign": "live", "cell": key,
             "index": 1, "label": label, "attempt": 1, "pid": proc.pid,
             "events": str(attempt / "events.jsonl"), "log_path": str(attempt / "cell.log")}])

        async def scenario():
            app = FugueApp(attach=str(run), clock=lambda: T0 + 5)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: _run_screen(app)
                            and app.screen.query_one(CellTable).row_count == 1)
                await pilot.press("d")
                screen = await until(pilot, lambda: isinstance(app.screen, StackScreen)
                                     and app.screen, timeout=15, what="the stacks")
                report = screen.report
                assert "training_step" in report  # the cell's own frame, from its dump
                assert f"{proc.pid:>7}" in report and "process tree" in report
                assert "job_progress" in report and "last 12 events" in report
                assert proc.poll() is None  # asked, not stopped
                await pilot.press("escape")
                await until(pilot, lambda: _run_screen(app), what="back to the run")

        asyncio.run(scenario())
    finally:
        proc.kill()
        proc.wait()


def test_speedup_so_far_and_the_campaign_eta(tmp_path, monkeypatch):
    """The header's strip: each strategy cell's speedup over seq from this campaign's rows
    (the analysis of the Results screen, interval included), and an ETA from the cells'
    mean durations by executor."""
    from engine.observe.state import CampaignState
    from engine.results.analysis import speedups
    from engine.results.load import load_runs
    from fugue_tui.app.models.eta import campaign_eta
    from tests.snapshots.helpers import install

    monkeypatch.chdir(tmp_path)
    runs = install(tmp_path)
    run = runs / "speed"
    table = speedups(load_runs(runs), n_boot=0)
    d_ens = table[(table["exp_id"] == "D_ens") & (table["executor"] == "unified_model")
                  & (table["campaign_id"] == "speed")] if "campaign_id" in table else \
        table[(table["exp_id"] == "D_ens") & (table["executor"] == "unified_model")]

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: _run_screen(app)
                        and "speedup so far" in screen_text(app), timeout=30,
                        what="the speedup so far")
            header = screen_text(app).splitlines()[0:3]
            line = next(h for h in header if "speedup so far" in h)
            value = d_ens["speedup"].iloc[0]
            # one K, one precision: the label names no axis (issue 47, item 4)
            assert f"D_ens unified_model {value:.2f}× [" in line, line

    asyncio.run(scenario())

    def cell(key, label, state, start=None, end=None):
        return [{"type": "queued", "cell": key, "index": len(key), "label": label,
                 "campaign": "c"}] + ([{"type": "cell_started", "cell": key, "attempt": 1,
                                        "ts": start, "campaign": "c", "index": 1,
                                        "label": label}] if start is not None else []) + (
            [{"type": state, "cell": key, "attempt": 1, "ts": end, "campaign": "c"}]
            if end is not None else [])

    state = CampaignState()
    for event in (cell("a", "D_ens seq pass 1", "done", 0.0, 10.0)
                  + cell("bb", "D_ens unified_model pass 1", "done", 10.0, 14.0)
                  + cell("ccc", "D_cv seq pass 1", "running", 14.0)
                  + cell("dddd", "D_cv unified_model pass 1", "queued")
                  + cell("eeeee", "D_cv ray pass 1", "queued")):
        state.apply(event)
    eta = campaign_eta(state, now=17.0)
    assert eta is not None and eta.left_s == (10 - 3) + 4 + (10 + 4) / 2
    assert campaign_eta(CampaignState(), now=0.0) is None
