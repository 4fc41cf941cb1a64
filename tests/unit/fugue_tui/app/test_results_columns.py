"""The Results screen's column picker (issue 48, item 5): ``c`` opens a checklist of the
table's columns, Space toggles, Enter applies, ``d`` checks them all again, Escape cancels;
the choice is saved per user (``<config dir>/results_columns.toml``) and restored by the
next app; a file that cannot be read gives the defaults and one warning; unknown names in
it are ignored. The picker's snapshots at 80x24 and 160x48 (tests/snapshots/)."""

from __future__ import annotations

import asyncio
import os
import tomllib
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import SelectionList

from engine.errors import ConfigError, OutputError
from fugue_tui.app.actions import by_id
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.results import COLUMNS
from fugue_tui.app.models.results_columns import (
    FILE,
    KEY_COLUMNS,
    columns_path,
    hideable,
    load_hidden,
    save_hidden,
)
from fugue_tui.app.screens.results import ResultsScreen
from fugue_tui.app.screens.results_columns import ColumnPicker
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot, install

ROWS = 32  # group rows in the recording


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch) -> Path:
    """A private config folder (the user's own choice must not leak in or be written)."""
    folder = tmp_path / "config"
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(folder))
    monkeypatch.delenv("NO_COLOR", raising=False)
    return folder


def test_the_file_round_trips_and_ignores_unknown_and_key_columns(config):
    assert columns_path() == config / FILE
    assert load_hidden() == frozenset()  # no file: every column shows
    path = save_hidden({"host", "scheduler", "experiment", "gone"})
    assert path == config / FILE
    # in the table's order; a key column and an unknown name are not written
    assert tomllib.loads(path.read_text()) == {"results": {"hidden": ["scheduler", "host"]}}
    assert load_hidden() == {"scheduler", "host"}
    # a file from another version: a removed column and a key column are ignored
    path.write_text('[results]\nhidden = ["host", "removed_col", "executor"]\n'
                    '[later]\nx = 1\n')
    assert load_hidden() == {"host"}
    assert not [p for p in config.iterdir() if p.name != FILE]  # no temporary file left
    assert set(hideable()) == {k for k, _, _ in COLUMNS} - set(KEY_COLUMNS)


@pytest.mark.parametrize("text, what", [
    ("[results\n", "invalid TOML"),
    ("results = 3\n", "results: expected a table"),
    ('[results]\nhidden = "host"\n', "results.hidden: expected a list"),
    ("[results]\nhidden = [1, 2]\n", "results.hidden: expected a list"),
])
def test_a_corrupt_file_is_one_line_naming_it(config, text, what):
    config.mkdir()
    (config / FILE).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_hidden()
    assert str(info.value).startswith(str(config / FILE)) and what in str(info.value)
    assert "\n" not in str(info.value)


def test_a_save_that_cannot_be_written_names_the_file(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=r"file/results_columns\.toml: cannot save"):
        save_hidden({"host"}, tmp_path / "file" / FILE)


def _columns(app) -> list[str]:
    table = app.screen.query_one("#groups")
    return [str(c.key.value) for c in table.ordered_columns]


async def _results(app, pilot) -> ResultsScreen:
    return await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                       and app.screen.query_one("#groups").row_count == ROWS
                       and app.screen, timeout=20, what="the recording's rows")


def test_hide_a_column_then_a_new_app_restores_it_and_d_shows_all(tmp_path, config):
    """80x24: ``c``, Space on two columns, Enter: both gone from the table, the others
    fitted to the width without them (a column cut before now whole), the file written.
    Escape leaves the columns be. A new app (160x48) opens with them hidden; ``c``, ``d``,
    Enter: every column again, the file saying so."""
    runs = install(tmp_path)
    every = [k for k, _, _ in COLUMNS]

    async def first():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await _results(app, pilot)
            assert _columns(app) == every
            table = screen.query_one("#groups")
            await pilot.press("c")
            picker = await until(pilot, lambda: isinstance(app.screen, ColumnPicker)
                                 and app.screen, what="the picker")
            checklist = picker.query_one(SelectionList)
            assert set(checklist.selected) == set(every)
            # the first enabled option (scheduler) is highlighted: the key columns are
            # disabled. Hide features and K.
            await pilot.press("down", "space", "down", "space")
            await until(pilot, lambda: set(checklist.selected) == set(every) - {"features", "K"},
                        what="features and K unchecked")
            # said in words (the box's check is a colour only)
            await until(pilot, lambda: "features  · hidden" in screen_text(app)
                        and "K  · hidden" in screen_text(app), what="the words")
            await pilot.press("enter")
            await until(pilot, lambda: app.screen is screen
                        and _columns(app) == [k for k in every if k not in ("features", "K")],
                        what="the table without them")
            assert "2 columns hidden (c)" in screen_text(app)
            # the fitting: the columns shown share the width (no hidden column counted)
            assert table._widths == table._fit() and len(table._widths) == len(every) - 2  # noqa: SLF001
            doc = tomllib.loads((config / FILE).read_text())
            assert doc == {"results": {"hidden": ["features", "K"]}}
            # escape: nothing changes, nothing written
            stamp = os.stat(config / FILE).st_mtime_ns
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ColumnPicker))
            await pilot.press("space", "escape")
            await until(pilot, lambda: app.screen is screen)
            assert "features" not in _columns(app) and "scheduler" in _columns(app)
            assert os.stat(config / FILE).st_mtime_ns == stamp

    async def second():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=(160, 48)) as pilot:
            await _results(app, pilot)
            assert _columns(app) == [k for k in every if k not in ("features", "K")]
            assert not app._notifications  # noqa: SLF001 - a good file: no warning
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "columns" in titles  # the palette lists it
            await pilot.press("c")
            picker = await until(pilot, lambda: isinstance(app.screen, ColumnPicker)
                                 and app.screen, what="the picker")
            checklist = picker.query_one(SelectionList)
            assert set(checklist.selected) == set(every) - {"features", "K"}
            await pilot.press("d")
            await until(pilot, lambda: set(checklist.selected) == set(every))
            await pilot.press("enter")
            await until(pilot, lambda: _columns(app) == every, what="every column again")
            assert "hidden" not in screen_text(app).split("\n")[4]
            assert tomllib.loads((config / FILE).read_text()) == {"results": {"hidden": []}}

    asyncio.run(first())
    asyncio.run(second())
    assert "choose the columns shown" in by_id("results.columns").help  # ? and the palette


def test_a_corrupt_file_gives_the_defaults_and_one_warning(tmp_path, config):
    """A file that is not TOML: every column, one warning naming it; applying a choice
    replaces it with a good file."""
    runs = install(tmp_path)
    config.mkdir()
    (config / FILE).write_text('[results]\nhidden = ["host"\n')

    async def scenario():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=(160, 48)) as pilot:
            await _results(app, pilot)
            assert _columns(app) == [k for k, _, _ in COLUMNS]
            notes = [n for n in app._notifications if FILE in n.message]  # noqa: SLF001
            assert len(notes) == 1 and notes[0].severity == "warning"
            assert "invalid TOML" in notes[0].message and "default columns" in notes[0].message
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ColumnPicker))
            await pilot.press("end", "space", "enter")  # the last column: reason
            await until(pilot, lambda: "reason" not in _columns(app))
            assert load_hidden() == {"reason"}

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_the_column_picker_snapshot(tmp_path, size):
    """The picker over an empty screen (the Results screen under it has its own
    snapshots), scheduler and host unchecked, the key columns disabled."""

    class Host(App):
        CSS_PATH = str(Path(__file__).resolve().parents[4] / "fugue_tui" / "app" / "app.tcss")

        def on_mount(self) -> None:
            self.push_screen(ColumnPicker(frozenset({"scheduler", "host"})))

    async def scenario():
        app = Host()
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ColumnPicker)
                        and "Columns shown" in screen_text(app), what="the picker")
            before = None  # until the last paint
            for _ in range(30):
                await pilot.pause(0.1)
                now = app.export_screenshot()
                if now == before:
                    break
                before = now
            await await_snapshot(pilot, app, f"results_columns_{size[0]}x{size[1]}", tmp_path)

    asyncio.run(scenario())
