"""Replay seek (issue 48, item 5): ``[`` / ``]`` and ``T`` (a time prompt) move a replay
backwards or forwards; the screen after a seek reads exactly as if played to that time."""

from __future__ import annotations

import asyncio
import time

import pytest
from rich.text import Text
from textual.widgets import Input, Label

from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.replay import Replay, parse_time
from fugue_tui.app.screens.replay_seek import SeekScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot, install


@pytest.fixture(autouse=True)
def pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)


def test_parse_time_takes_mss_hmmss_and_seconds_and_names_a_bad_value():
    assert parse_time("90") == 90.0
    assert parse_time(" 1:30 ") == 90.0
    assert parse_time("0:01:30") == 90.0
    assert parse_time("2.5") == 2.5
    for bad in ("", "abc", "1:75", "-3", "1::2", "1.5:00", "nan", "inf"):
        with pytest.raises(ValueError, match="not a time"):
            parse_time(bad)


def test_seek_moves_the_position_both_ways_and_bumps_the_generation():
    events = [{"type": "e", "ts": t} for t in (100.0, 105.0, 110.0, 130.0)]
    replay = Replay(events, paused=True)
    generation, upto = replay.seek(110.0)
    assert (generation, replay.pos, replay.clock()) == (1, 3, 110.0) and len(upto) == 3
    generation, upto = replay.seek(101.0)  # backwards
    assert (generation, replay.pos, upto) == (2, 1, replay.events[:1])
    replay.seek(0.0)  # clamped to the campaign
    assert (replay.pos, replay.clock()) == (1, 100.0)
    replay.seek(1e9)
    assert replay.done and replay.clock() == 130.0
    assert replay.seek_step() == 10.0  # 30 s / 20 is under the 10 s floor
    assert replay.due_tagged() == (4, [])


def test_the_seek_keys_are_in_the_help():
    from rich.console import Console

    from fugue_tui.app.screens.modals import help_table

    console = Console(width=200, record=True)
    console.print(help_table({}, width=200))
    text = console.export_text()
    for key, what, id_ in (("[", "seek back a 20th", "replay.back"),
                           ("]", "seek forward a 20th", "replay.forward"),
                           ("T", "seek to a time", "replay.seek")):
        line = next(li for li in text.splitlines() if id_ in li.split())
        assert line.split()[0] == key and what in line, line


def _state(screen: RunScreen) -> tuple[object, ...]:
    """The cell table's rows (text), the header's text, the recent lines and the cells'
    states (what every pane draws from)."""
    table = screen.query_one(CellTable)
    rows = [tuple(c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i))
            for i in range(table.row_count)]
    state = screen.view.state
    return (rows, screen.panes.header._shown,  # noqa: SLF001 - the text the header shows
            list(screen.view.recent), repr(sorted(state.cells.items())), state.state)


def test_seek_back_and_forward_reads_as_straight_play(tmp_path):
    """Played straight to the middle, then to the end, then back to the middle with ``T``,
    then ``]`` and ``[``: the table's rows and the header are those of straight play."""
    run = install(tmp_path) / "speed"
    wall = [0.0]
    replay, _ = Replay.open(run, speed=1.0, wall=lambda: wall[0])
    seconds = int((replay.end_ts - replay.start_ts) / 2)
    middle = sum(t <= replay.start_ts + seconds for t in replay._times)  # noqa: SLF001

    async def scenario():
        app = FugueApp()
        async with app.run_test(size=(160, 48)) as pilot:
            screen = RunScreen(run, None, 0, replay=replay)
            await app.push_screen(screen)
            wall[0] = float(seconds)  # straight play to the middle
            await until(pilot, lambda: replay.pos == middle, what="the middle")
            await pilot.press("space")
            await until(pilot, lambda: f"{middle}/" in screen_text(app) and "paused"
                        in screen_text(app), what="paused at the middle")
            straight = _state(screen)
            assert straight[0] and 0 < middle < len(replay.events)
            await pilot.press("E")
            await until(pilot, lambda: replay.done and "finished" in screen_text(app),
                        what="the end")
            assert _state(screen) != straight
            await pilot.press("T")
            await until(pilot, lambda: isinstance(app.screen, SeekScreen), what="the prompt")
            await pilot.press(*f"0:{seconds:02d}" if seconds < 60 else str(seconds), "enter")
            await until(pilot, lambda: app.screen is screen and replay.pos == middle,
                        what="back to the middle")
            assert _state(screen) == straight
            await pilot.press("right_square_bracket")
            await until(pilot, lambda: replay.pos > middle, what="a step forward")
            assert _state(screen) != straight
            await pilot.press("left_square_bracket")
            await until(pilot, lambda: replay.pos == middle, what="a step back")
            assert _state(screen) == straight
            await pilot.press("T", "0", "enter")  # the start: rows not yet queued must go
            await until(pilot, lambda: app.screen is screen and replay.pos < middle)
            queued = sum(e["type"] == "queued" for e in replay.events[:replay.pos])
            assert screen.query_one(CellTable).row_count == queued < len(straight[0])

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_a_bad_time_says_so_in_one_line_and_leaves_the_replay(tmp_path, size):
    run = install(tmp_path) / "speed"

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent))
        async with app.run_test(size=size) as pilot:
            screen = app.open_replay(run, paused=True)
            await pilot.pause(0.3)
            before = (screen.replay.pos, screen.replay.clock(), screen.replay.generation)
            titles = [c.title for c in app.get_system_commands(screen)]
            assert {"rewind", "skip ahead", "seek to"} <= set(titles), titles
            await pilot.press("T")
            prompt = await until(pilot, lambda: isinstance(app.screen, SeekScreen)
                                 and app.screen)
            await pilot.press(*"9:99", "enter")
            hint = prompt.query_one("#seek-hint", Label)
            await until(pilot, lambda: "not a time: '9:99'" in screen_text(app),
                        what="the one line")
            assert hint.display and prompt.query_one(Input).value == "9:99"
            await await_snapshot(pilot, app, f"replay_seek_prompt_{size[0]}x{size[1]}", tmp_path)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen)
            assert (screen.replay.pos, screen.replay.clock(),
                    screen.replay.generation) == before

    asyncio.run(scenario())
