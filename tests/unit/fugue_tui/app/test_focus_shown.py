"""Where the keys go (issue 47): after cycling the run screen's zoom (``z``) j/k move the
cells again without a Tab, and the Results screen marks the pane that has the focus."""

from __future__ import annotations

import asyncio
import shutil

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.results import ResultsScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import FIXTURES, install

SIZE = (160, 48)


def test_j_and_k_work_in_every_zoom_and_after_the_cycle(tmp_path, monkeypatch):
    """On main the focus stayed on the cell table the zoom hid; Textual blurred it, and
    j/k did nothing (even after the cycle came back to every pane) until Tab."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    runs = install(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(runs / "speed"))
        async with app.run_test(size=SIZE) as pilot:
            table = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                and (t := app.screen.query_one(CellTable)).row_count == 20
                                and t, what="the 20 cells")
            screen = app.screen
            await pilot.press("g")
            await until(pilot, lambda: table.cursor_row == 0, what="the first cell")
            focus = {"cells": "cells", "jobs": "jobs-pane", "monitor": None, "log": "log",
                     "events": None, "": "cells"}
            for pane, expected in focus.items():
                await pilot.press("z")
                await until(pilot, lambda p=pane, e=expected: screen.zoomed == p and (
                    app.focused.id if app.focused else None) == e,
                    what=f"zoom {pane or 'every pane'} with the keys on {expected}")
                if pane in ("monitor", "events"):  # no pane takes keys: j moves the cells
                    row = table.cursor_row
                    await pilot.press("j")
                    await until(pilot, lambda r=row: table.cursor_row == r + 1,
                                what=f"j moving the cells while {pane} is zoomed")
            row = table.cursor_row
            await pilot.press("j", "j", "k")
            await until(pilot, lambda: table.cursor_row == row + 1, what="j j k on the cells")

    asyncio.run(scenario())


def test_results_screen_marks_the_pane_with_the_focus(tmp_path, monkeypatch):
    """Titled panes, the focused one marked ``> ``; Escape in the filter goes to the table
    (on main it left the Results screen)."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURES / "harness", tmp_path / "harness")

    async def scenario():
        app = FugueApp(results="harness")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                        and "─ > rows " in screen_text(app), what="the table marked")
            assert "─ figures " in screen_text(app) and "─ filter " in screen_text(app)
            await pilot.press("tab")
            await until(pilot, lambda: "─ > figures " in screen_text(app)
                        and "─ rows " in screen_text(app), what="the figures marked")
            await pilot.press("slash")
            await until(pilot, lambda: "─ > filter " in screen_text(app)
                        and "─ figures " in screen_text(app), what="the filter marked")
            await pilot.press("o")  # typed into the filter, not a sort
            await until(pilot, lambda: app.screen.query_one("#results-filter").value == "o",
                        what="o in the filter")
            assert "sorted by" not in screen_text(app)
            # Escape leaves the filter for the table; the screen stays (item 9)
            await pilot.press("escape")
            await until(pilot, lambda: "─ > rows " in screen_text(app), what="the table")
            assert isinstance(app.screen, ResultsScreen)

    asyncio.run(scenario())
