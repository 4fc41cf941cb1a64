"""Issue 47 item 10, the smaller defects a first-time user hit, each pinned by a test that
failed before its fix: `d` with nothing to dump said nothing; a busy-host warning took 3-4
rows of the events pane; stop only inside quit; the attach dialog proposed a folder that did
not exist; `/` in Results replaced the filter; the knee chart's axis in 4.5e5; the stack
dump's last events were monitor samples."""

from __future__ import annotations

import asyncio
import os

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import until
from tests.unit.fugue_tui.app.test_app_run_screen import T0, recorded_run

SIZE = (150, 48)
#: A 1-minute load average above this host's cores, whatever their number.
LOAD = float(2 * (os.cpu_count() or 1) + 1)


def _notified(app, text: str) -> str:
    """The first notification that contains ``text`` ("" when none does)."""
    return next((n.message for n in app._notifications if text in n.message), "")  # noqa: SLF001


def test_d_with_no_running_cell_says_why(tmp_path, monkeypatch):
    """An ended campaign: `d` on a finished cell names why there is nothing to dump (it did
    nothing at all), and the footer still does not offer "stacks" there."""
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and app.screen.query_one(CellTable).row_count == 3)
            await pilot.press("d")
            said = await until(pilot, lambda: _notified(app, "no stacks to dump"),
                               what="the reason d has nothing to dump")
            assert "X_block seq pass 1 is" in said and "not running" in said, said
            footer = {b.description for _n, b, _e, _t in app.screen.active_bindings.values()
                      if b.show}
            assert "stacks" not in footer

    asyncio.run(scenario())


def test_why_no_stacks_names_each_reason():
    from types import SimpleNamespace

    from fugue_tui.app.models.run import why_no_stacks

    running = SimpleNamespace(label="E1 seq", state="running", active=True, pid=7,
                              log_path="a/cell.log")
    assert why_no_stacks(running, replay=False) == ""
    assert "replay" in why_no_stacks(running, replay=True)
    assert "no cell selected" in why_no_stacks(None, replay=False)
    starting = SimpleNamespace(**{**vars(running), "pid": None})
    assert "no pid" in why_no_stacks(starting, replay=False)
    done = SimpleNamespace(**{**vars(running), "state": "finished", "active": False})
    assert "E1 seq is finished, not running" in why_no_stacks(done, replay=False)


def _busy_line() -> str:
    """A busy-host warning as the engine words it (load_warnings, with competitors)."""
    from engine.cell.rows import load_warnings

    competitors = [{"name": "python", "pid": 4242, "cpu_pct": 95.0},
                   {"name": "ray::IDLE", "pid": 4343, "cpu_pct": 40.0},
                   {"name": "chromium-browser", "pid": 4444, "cpu_pct": 33.0}]
    # the load is compared with the whole host's cores: well above them on any host
    busy = load_warnings(10.0, None, 1, (LOAD, None), competitors=competitors)
    assert len(busy) == 1 and "the machine was busy" in busy[0], busy
    return busy[0]


def test_a_busy_host_warning_is_one_row_of_the_events_pane_in_full_zoomed(tmp_path,
                                                                          monkeypatch):
    """A busy-host warning wrapped to 3-4 rows of the events pane: one row now (cut at its
    edge), the whole text when the events pane is zoomed to (z) - the details on demand."""
    from tests.app_screen import screen_text
    from tests.unit.fugue_tui.app.test_app_run_screen import _write

    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)
    warning = _busy_line()
    events = run / "cells" / "002-D_ens-seq-p1-bbbbbbbb" / "attempt-1" / "events.jsonl"
    _write(events, [{"ts": T0 + 30, "type": "warning", "cell": "b" * 16, "attempt": 1,
                     "message": warning}])

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=(160, 48)) as pilot:
            pane = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                               and app.screen.query_one("#recent"))
            row = await until(pilot, lambda: next(
                (r for r in screen_text(app).splitlines() if f"host busy, load {LOAD:.1f}" in r), ""),
                what="the busy-host warning, in one row")
            shown = row.split("│")[-2] if row.count("│") >= 2 else row
            assert shown.rstrip().endswith("…"), row  # cut at the pane's edge, not wrapped
            assert "4444" not in screen_text(app)  # the rest is not on a row of its own
            assert "campaign finished" in screen_text(app)  # the lifecycle still shows
            for _ in range(5):  # cells, jobs, monitor, log, events
                await pilot.press("z")
            await until(pilot, lambda: "chromium-browser (pid 4444) 33 %"
                        in screen_text(app).replace("\n", " ") and pane.size.width > 100,
                        what="the whole warning, zoomed to the events")

    asyncio.run(scenario())


def test_brief_keeps_the_stamp_and_the_cell_and_leaves_other_lines():
    from fugue_tui.app.widgets.recent_lines import brief

    line = f"08:00:30 D_ens seq pass 1: warning: {_busy_line()}"
    cores = os.cpu_count() or 1
    assert brief(line) == (f"08:00:30 D_ens seq pass 1: host busy, load {LOAD:.1f} on {cores} "
                           "cores; "
                           "busiest: python (pid 4242) 95 %, ray::IDLE (pid 4343) 40 %, "
                           "chromium-browser (pid 4444) 33 %")
    assert brief("08:00:31 campaign finished, exit code 0") is None


class _Runner:
    """A live runner as the run screen sees one (RunnerHandle's alive, pid, stop): stop()
    records that it was asked and ends it."""

    def __init__(self, run_dir) -> None:
        self.run_dir, self.pid, self.stops = run_dir, 4321, 0

    def alive(self) -> bool:
        return self.stops == 0

    def stop(self, cell_pids=None) -> list[int]:
        self.stops += 1
        return []


def test_S_stops_the_campaign_after_asking_and_keeps_the_screen(tmp_path, monkeypatch):
    """Stop was only inside quit: `S` asks, stops the runner the way quit's stop does
    (RunScreen.begin_stop -> handle.stop) and the run screen stays, showing how it ended;
    the help and the palette offer it under its keymap id."""
    from rich.console import Console

    from fugue_tui.app.actions import by_id
    from fugue_tui.app.screens.modals import ConfirmScreen, help_text
    from fugue_tui.app.screens.plan import PlanScreen
    from tests.app_screen import screen_text

    assert by_id("run.stop").key == "S"
    shown = help_text(Console(width=146), {}, 146).plain
    assert "run.stop" in shown and "stop the campaign and keep this screen" in shown
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)
    runner = _Runner(run)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: T0 + 40)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen))
            screen = app.open_run(run, runner, 0)
            await until(pilot, lambda: screen.runner_alive and screen.is_current
                        and "campaign finished" in screen_text(app))
            offered = {c.help for c in app.get_system_commands(screen)}
            assert any("stop the campaign and keep this screen" in h for h in offered)
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked")
            assert runner.stops == 0  # nothing before the answer
            await pilot.press("y")
            await until(pilot, lambda: _notified(app, "stopped campaign rec"),
                        what="the stop's outcome")
            assert runner.stops == 1 and app.screen is screen and app.is_running
            await until(pilot, lambda: screen.runner_alive is False, what="the runner gone")
            assert not screen.check_action("stop_campaign", ())  # nothing left to stop

    asyncio.run(scenario())


def test_attach_offers_the_recent_run_folders_newest_first(tmp_path, monkeypatch):
    """ctrl+t proposed runs/<the plan's name>, a folder that did not exist: it proposes the
    newest run folder that exists (running or ended) and lists the recent ones, newest
    first; choosing one attaches to it."""
    import shutil
    import time

    from textual.widgets import Input, OptionList

    from fugue_tui.app.screens.modals import PathScreen
    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    newer = recorded_run(tmp_path)
    older = newer.parent / "older"
    shutil.copytree(newer, older)
    an_hour_ago = time.time() - 3600
    os.utime(older / "runner.jsonl", (an_hour_ago, an_hour_ago))
    (newer.parent / "not-a-run").mkdir()  # no runner.jsonl: not offered

    async def scenario():
        app = FugueApp(runs_dir=str(newer.parent))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen))
            app.screen.doc["runs_dir"] = str(newer.parent)
            await pilot.press("ctrl+t")
            dialog = await until(pilot, lambda: isinstance(app.screen, PathScreen)
                                 and app.screen.query(OptionList) and app.screen,
                                 what="the attach dialog with its choices")
            assert dialog.query_one(Input).value == str(newer)  # exists, the newest
            listed = dialog.query_one(OptionList)
            labels = [str(listed.get_option_at_index(i).prompt)
                      for i in range(listed.option_count)]
            assert [label.split(" · ")[0] for label in labels] == ["rec", "older"], labels
            assert all("ended" in label for label in labels), labels
            await pilot.press("tab", "down", "enter")  # the second one: older
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen, what="attached to the chosen folder")
            assert screen.run_dir == older

    asyncio.run(scenario())


def test_slash_edits_the_current_filter_rather_than_replacing_it(tmp_path, monkeypatch):
    """Results: `/` then typing replaced the filter shown (the box selected it all on
    focus); the keys typed now add to it, the cursor at its end."""
    from textual.widgets import Input

    from fugue_tui.app.screens.results import ResultsScreen

    monkeypatch.chdir(tmp_path)
    runs = recorded_run(tmp_path).parent

    async def scenario():
        app = FugueApp(runs_dir=str(runs))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.screen.is_current)
            app.push_screen(ResultsScreen(runs, "campaign:rec"))
            box = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                              and app.screen.query("#results-filter")
                              and app.screen.query_one("#results-filter", Input))
            await pilot.press("slash")
            await until(pilot, lambda: box.has_focus, what="the filter box focused")
            await pilot.press("space", "e", "x", "p", "colon", "X")
            await until(pilot, lambda: box.value == "campaign:rec exp:X",
                        what=f"the filter extended (has {box.value!r})")
            assert app.screen.filter_text == "campaign:rec"  # applied on Enter only
            await pilot.press("enter")
            await until(pilot, lambda: app.screen.filter_text == "campaign:rec exp:X",
                        what="the extended filter applied")

    asyncio.run(scenario())


def test_the_knee_charts_throughput_axis_reads_in_plain_numbers():
    """Above 99,999 samples/s the knee chart's y axis read 4.5e5, 3.4e5…: plain round
    numbers now, the top one above the highest point."""
    import re

    from fugue_tui.report.charts import knee_chart

    chart = knee_chart([("unified", [1, 2, 4, 8, 16],
                         [120_000.0, 210_000.0, 360_000.0, 410_000.0, 420_000.0], 8)],
                       width=80, color=False)
    axis = [line.split("┤")[0].strip() for line in chart.splitlines() if "┤" in line]
    assert axis and not any(re.search(r"\de[+-]?\d", label) for label in axis), axis
    assert axis[-1] == "0" and "400,000" in axis, axis
    assert float(axis[0].replace(",", "")) >= 420_000, axis


def test_the_stack_dumps_last_events_are_what_the_cell_did_not_its_samples(tmp_path):
    """The dump's "last events" were the monitor's samples (one a second): its lifecycle
    and progress events now, however many samples came after them (here over the 64 KiB
    the list used to read)."""
    from fugue_tui.app.models.stack_report import last_events
    from tests.unit.fugue_tui.app.test_app_run_screen import _write

    def cell(kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "cell": "c" * 16, "attempt": 1, **fields}

    events = tmp_path / "events.jsonl"
    _write(events, [cell("started", 1, jobs=["E1_s0"]), cell("job_started", 2, job_id="E1_s0")]
           + [cell("job_progress", 3 + i, job_id="E1_s0", epoch=1, epochs=3, step=i, steps=9)
              for i in range(3)]
           + [cell("sample", 10 + i, t=float(i), cpu_pct=99.0, rss_mib=300.0,
                   gpu_util_pct=None, mem_used_mib=None) for i in range(1500)])
    assert events.stat().st_size > 128 * 1024
    shown = last_events(events, n=4)
    assert [line.split()[1] for line in shown] == [
        "job_started", "job_progress", "job_progress", "job_progress"], shown
    assert '"step": 2' in shown[-1]  # the newest last
    assert last_events(tmp_path / "missing.jsonl") == []
