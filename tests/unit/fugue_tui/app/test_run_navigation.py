"""The run screen's navigation (issue 48, item 2): jump keys, ``/`` search with ``n``/``N``
in the log and the events, the selected cell's files in ``$PAGER``/``$EDITOR`` and back,
its key and folder copied (OSC 52) and shown (and a Results row's key). Each UI test waits
on what it asserts."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest
from textual.drivers.headless_driver import HeadlessDriver

from engine.events import read_events
from fugue_tui.app.app import FugueApp
from fugue_tui.app.external import NoProgram, command
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.screens.results import ResultsScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.search import count_label, matching, nearest, step
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.log_pane import LogPane
from fugue_tui.app.widgets.recent_lines import RecentLines
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot, install

SIZE = (160, 48)
FIRST = "001-D_ens-seq-p1-7b9b2584"
#: The first cell's log, written over the recorded (empty) one: 60 lines, every tenth a
#: "checkpoint" (6 matches), the rest "step".
LOG = [f"checkpoint {i // 10} saved" if i % 10 == 5 else f"step {i}" for i in range(60)]


# ------------------------------------------------------------------ the pure parts
def test_matching_lines_step_around_the_ends_and_count():
    lines = ["a Foo", "bar", "foo b", "FOO", "baz"]
    found = matching(lines, "foo")
    assert found == [0, 2, 3]
    assert matching(lines, "") == []
    assert step(found, None) == 0 and step(found, 0) == 2 and step(found, 3) == 0  # wraps
    assert step(found, None, False) == 3 and step(found, 0, False) == 3  # wraps back
    assert step(found, 2, False) == 0 and step([], 1) is None
    assert nearest(found, 2) == 2 and nearest(found, 1) == 2 and nearest(found, None) == 0
    assert count_label(found, 2) == "2/3" and count_label([], None) == "0/0"
    assert count_label(found, 1) == "-/3"


def test_the_program_command_from_the_variable(tmp_path):
    env = {"PATH": os.environ["PATH"], "PAGER": "less -R"}
    assert command("PAGER", tmp_path / "f", env) == ["less", "-R", str(tmp_path / "f")]
    assert command("PAGER", tmp_path / "f", {"PATH": os.environ["PATH"]})[0] == "less"
    assert command("EDITOR", tmp_path / "f", {"PATH": "/bin:/usr/bin", "VISUAL": "cat"}) \
        == ["cat", str(tmp_path / "f")]
    with pytest.raises(NoProgram, match=r"\$PAGER names 'no-such-pager', which is not a "
                                         r"program here"):
        command("PAGER", tmp_path / "f", {"PATH": os.environ["PATH"], "PAGER": "no-such-pager"})
    with pytest.raises(NoProgram, match="cannot be read as a command"):
        command("EDITOR", tmp_path / "f", {"PATH": "", "EDITOR": "vi 'unclosed"})


# ------------------------------------------------------------------ the screen
def _runs(tmp_path: Path) -> Path:
    runs = install(tmp_path)
    (runs / "speed" / "cells" / FIRST / "attempt-1" / "cell.log").write_text(
        "\n".join(LOG) + "\n")
    return runs


async def _first_cell(pilot) -> RunScreen:
    """The run screen with the first cell selected and its log shown."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, RunScreen)
                and app.screen.query_one(CellTable).row_count == 20, what="the 20 cells")
    await pilot.press("g")
    await until(pilot, lambda: len(app.screen.query_one(LogPane).lines) == len(LOG),
                what="its log")
    return app.screen


def _notified(app, text: str) -> str:
    """The newest notification containing ``text`` ("" when none)."""
    return next((n.message for n in reversed(list(app._notifications))  # noqa: SLF001
                 if text in n.message), "")


def _titles(screen: RunScreen) -> dict[str, str]:
    return {w.id: str(w.border_title or "") for w in screen.query("#cells, #jobs-pane, #log, #recent")}


def test_jump_keys_search_and_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    runs = _runs(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(runs / "speed"))
        async with app.run_test(size=SIZE) as pilot:
            screen = await _first_cell(pilot)
            # every navigation key is in the palette (n/N/Escape's only while searching)
            offered = {c.title for c in app.get_system_commands(screen)}
            assert {"to cells", "to jobs", "to log", "to events", "search", "pager",
                    "events in pager", "editor", "copy key", "copy folder"} <= offered
            assert "next match" not in offered
            # -- jump keys: the keys and the "> " mark go to the pane named
            for key, pane in (("2", "jobs-pane"), ("3", "log"), ("4", "recent"),
                              ("1", "cells")):
                await pilot.press(key)
                await until(pilot, lambda p=pane: app.focused is not None
                            and (app.focused.id == p or app.focused.parent.id == p)
                            and _titles(screen)[p].startswith("> "),
                            what=f"{key}: the keys on {pane}")
            assert _titles(screen)["recent"] == ""  # titled only while it has the keys
            await pilot.press("z", "z", "z")  # the monitor alone: 3 shows every pane again
            await until(pilot, lambda: screen.zoomed == "monitor", what="the monitor zoomed")
            await pilot.press("3")
            await until(pilot, lambda: screen.zoomed == "" and app.focused.id == "log",
                        what="3 from a zoom: every pane, the keys on the log")
            # -- search the log: typed, counted, highlighted, n/N around the ends
            log = screen.query_one(LogPane)
            await pilot.press("slash", *"checkpoint")
            line = await until(pilot, lambda: screen.search_line(), what="the search line")
            await until(pilot, lambda: "in log 1/6" in screen_text(app), what="1/6")
            assert line.query_box.value == "checkpoint"  # typed right after "/"
            assert log.highlight and log.highlighter.query == "checkpoint"
            await pilot.press("enter")  # the keys back to the log
            await until(pilot, lambda: app.focused is log, what="the keys on the log")
            for key, count in (("n", "2/6"), ("N", "1/6"), ("N", "6/6"), ("n", "1/6"),
                               ("n", "2/6")):
                await pilot.press(key)
                await until(pilot, lambda c=count: f"in log {c}" in screen_text(app),
                            what=f"{key}: {count}")
            assert screen.search_at == 15
            assert log.scroll_y <= 15 < log.scroll_y + log.scrollable_content_region.height
            # "/" again: the keys back to the query; a query matching nothing counts 0/0
            await pilot.press("slash")
            await until(pilot, lambda: line.query_box.has_focus, what="the query again")
            line.query_box.value = ""
            await pilot.press(*"no such line")
            await until(pilot, lambda: "in log 0/0" in screen_text(app), what="0/0")
            await pilot.press("escape")  # from the query: closes the search, not the screen
            await until(pilot, lambda: screen.search_line() is None and app.focused is log,
                        what="search closed, the keys on the log")
            assert app.screen is screen and not log.highlight
            # -- search the events pane (it has the keys)
            recent = screen.query_one(RecentLines)
            await pilot.press("4", "slash", *"done")
            await until(pilot, lambda: "in events 1/" in screen_text(app),
                        what="the events searched")
            assert recent.search_query == "done" and recent.search_anchor is not None
            first = recent.search_anchor
            await pilot.press("enter", "n")
            await until(pilot, lambda: recent.search_anchor is not None and recent.search_anchor > first,
                        what="n in the events")
            await pilot.press("escape")
            await until(pilot, lambda: screen.search_line() is None and recent.search_anchor is None,
                        what="the events' newest lines again")
            # -- copy: the OSC 52 call with the text, and the text shown
            key = screen.selected_cell().key
            assert FIRST.endswith(key[:8])  # the folder's name ends with the key's start
            await pilot.press("1", "y")
            await until(pilot, lambda: app.clipboard == key, what="the key copied")
            await until(pilot, lambda: _notified(app, "copied the cell key").endswith(
                f"\n{key}"), what="the key shown")
            await pilot.press("Y")
            folder = str(runs / "speed" / "cells" / FIRST / "attempt-1")
            await until(pilot, lambda: app.clipboard == folder, what="the folder copied")
            await until(pilot, lambda: _notified(app, "copied the cell folder").endswith(
                f"\n{folder}"), what="the folder shown")
            # -- the Results screen's y: the selected row's cell key
            await pilot.press("v")
            results = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                  and app.screen.selected_key() and app.screen,
                                  timeout=20, what="the campaign's rows")
            row_key = results._by_key[results.selected_key()]["cell_key"]  # noqa: SLF001
            assert row_key
            await pilot.press("y")
            await until(pilot, lambda: app.clipboard == row_key, what="the row's key copied")
            assert _notified(app, "copied the cell key").endswith(f"\n{row_key}")

    asyncio.run(scenario())


def _fake_program(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A program that writes its arguments, one a line, to a file and exits: the script,
    the file."""
    out = tmp_path / f"{name}.argv"
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {out}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, out


def test_pager_and_editor_round_trip_and_their_notices(tmp_path, monkeypatch):
    """o/O/e run $PAGER/$EDITOR on the selected cell's files with the screen suspended
    (the headless driver cannot suspend: it is made to, as a terminal's would), then the
    screen is back and answers keys; a variable naming no program, and a terminal that
    cannot suspend, each say so in one line."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    runs = _runs(tmp_path)
    pager, pager_argv = _fake_program(tmp_path, "fake-pager")
    editor, editor_argv = _fake_program(tmp_path, "fake-editor")
    monkeypatch.setenv("PAGER", f"{pager} --flag")
    monkeypatch.setenv("EDITOR", str(editor))
    attempt = runs / "speed" / "cells" / FIRST / "attempt-1"
    suspended: list[str] = []

    async def scenario():
        app = FugueApp(runs_dir=str(runs))
        async with app.run_test(size=SIZE) as pilot:
            # a replay (from the plan screen, so that Escape has a screen to go back to)
            await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="the plan")
            screen = app.open_replay(runs / "speed", paused=True)
            await pilot.press("E")  # to the end: every cell there
            table = screen.query_one(CellTable)
            await until(pilot, lambda: screen.replay.done and table.row_count == 20,
                        what="the replay's end")
            await pilot.press("g")
            await until(pilot, lambda: "[1/20]" in screen_text(app), what="the first cell")
            # the terminal cannot be suspended (as headless): one line, nothing run
            await pilot.press("o")
            await until(pilot, lambda: "cannot be handed to" in _notified(app, "suspend"),
                        what="the cannot-suspend notice")
            assert str(attempt / "cell.log") in _notified(app, "suspend")
            assert not pager_argv.exists()
            # a terminal that can: the driver's suspend and resume, recorded
            monkeypatch.setattr(HeadlessDriver, "can_suspend", property(lambda self: True),
                                raising=False)
            monkeypatch.setattr(HeadlessDriver, "suspend_application_mode",
                                lambda self: suspended.append("suspend"), raising=False)
            monkeypatch.setattr(HeadlessDriver, "resume_application_mode",
                                lambda self: suspended.append("resume"), raising=False)
            for key, argv, expected in (
                    ("o", pager_argv, ["--flag", str(attempt / "cell.log")]),
                    ("O", pager_argv, ["--flag", str(attempt / "events.jsonl")]),
                    ("e", editor_argv, [str(attempt / "cell.log")])):
                argv.unlink(missing_ok=True)
                await pilot.press(key)
                await until(pilot, argv.exists, what=f"{key}: the program run")
                assert argv.read_text().splitlines() == expected
            assert suspended == ["suspend", "resume"] * 3
            # back and working: j moves the cursor, the panes follow it
            table = screen.query_one(CellTable)
            await pilot.press("j")
            await until(pilot, lambda: table.cursor_row == 1
                        and "[2/20]" in screen_text(app), what="j after the pager")
            # a variable naming no program: one line, nothing run
            monkeypatch.setenv("PAGER", "no-such-pager-48 -R")
            await pilot.press("o")
            await until(pilot, lambda: "$PAGER names 'no-such-pager-48', which is not a "
                        "program here" in _notified(app, "no-such-pager"),
                        what="the no-program notice")
            assert suspended == ["suspend", "resume"] * 3
            # n and Escape: the search's while one is open, else the replay's step and back
            await pilot.press("4", "slash", *"started", "enter")
            await until(pilot, lambda: "in events 1/" in screen_text(app), what="a search")
            at = screen.search_at
            await pilot.press("n")
            await until(pilot, lambda: screen.search_at != at, what="n: the next match")
            await pilot.press("escape")
            await until(pilot, lambda: screen.search_line() is None, what="search closed")
            assert app.screen is screen
            await pilot.press("escape")  # no search now: back to the plan
            await until(pilot, lambda: isinstance(app.screen, PlanScreen), what="back")

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_search_line_snapshot(tmp_path, monkeypatch, size):
    """The search line over the log: the query, what is searched, the count, the matches
    highlighted and the log moved to the second one."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "no-data").mkdir()
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    runs = _runs(tmp_path)
    last = max(e["ts"] for e in read_events(runs / "speed" / "runner.jsonl"))

    async def scenario():
        app = FugueApp(attach=str(runs / "speed"), clock=lambda: last + 10)
        async with app.run_test(size=size) as pilot:
            await _first_cell(pilot)
            # the strip is computed off the UI thread: in the snapshot, not racing it
            await until(pilot, lambda: "so far:" in screen_text(app)
                        and "campaign finished" in screen_text(app), timeout=30,
                        what="the strip and the campaign's end")
            await pilot.press("3", "slash", *"checkpoint", "enter", "n")
            await until(pilot, lambda: "/ checkpoint" in screen_text(app)
                        and "in log 2/6" in screen_text(app), what="the search at 2/6")
            await pilot.pause(0.3)
            name = "run_search" if size == (160, 48) else f"run_search_{size[0]}x{size[1]}"
            await await_snapshot(pilot, app, name, tmp_path)

    try:
        asyncio.run(scenario())
    finally:
        monkeypatch.undo()
        time.tzset()

