"""Snapshots of the run screen's cell filter and bulk question (issue 48, item 3) at 160x48
and 80x24, over the committed recording cut in the middle of cell 14 and opened as a live
campaign: the table filtered to exp:D_cv (its title counting "10 of 20 cells", the
running D_ens cell kept), then ``K`` on that running cell: one question naming the count
of D_ens's queued cells and how many of them the filter hides."""

from __future__ import annotations

import asyncio
import time

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.modals import ConfirmScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.screens.run_filter import ChoicePicker
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot
from tests.unit.fugue_tui.app.test_run_layout_small import (
    LARGE,
    RUNNING,
    SMALL,
    AliveRunner,
    live_copy,
)

TITLE = "cells · exp:D_cv · 10 of 20 cells + 1 running"
QUESTION = "Skip 2 queued cells of D_ens?"


async def _still(pilot, screen=None) -> None:
    """Until the screen stops changing (the last paint of a redraw). With ``screen``, its
    jobs pane scrolled to the top first: at 80x24 the pane scrolls, and where it rests
    after the resize depends on timing (the snapshot differed in its scrollbar only)."""
    if screen is not None:
        screen.query_one("#jobs-pane").scroll_home(animate=False)
    before = None
    for _ in range(50):
        await pilot.pause(0.1)
        now = screen_text(pilot.app)
        if now == before:
            return
        before = now


def test_filtered_table_and_bulk_question(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    # the host bar shows while the runner lives: a fixed host sample, not this machine's
    from fugue_tui.app.models import series
    from tests.unit.fugue_tui.app.test_host_bar import SAMPLE
    monkeypatch.setattr(series.HostPoller, "__init__", lambda self, **kw: None)
    monkeypatch.setattr(series.HostPoller, "sample", lambda self: dict(SAMPLE))
    run, cut = live_copy(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: cut + 5)
        async with app.run_test(size=LARGE) as pilot:
            app.open_run(run, AliveRunner(), 0, attached=True)
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and RUNNING.search(screen_text(app))
                        and "so far: D_ens" in screen_text(app), timeout=30,
                        what="cell 14 running and the strip")
            screen = app.screen
            await pilot.press("F")
            picker = await until(pilot, lambda: isinstance(app.screen, ChoicePicker)
                                 and app.screen, what="the picker")
            ids = [oid for oid, _ in picker.options]
            await pilot.press(*["down"] * ids.index("experiment=D_cv"), "enter")
            for size, suffix in ((LARGE, ""), (SMALL, "_80x24")):
                await pilot.resize_terminal(*size)
                await until(pilot, lambda: app.screen is screen and TITLE in screen_text(app)
                            and RUNNING.search(screen_text(app)), what=f"{TITLE} {size}")
                await _still(pilot, screen)
                await await_snapshot(pilot, app, f"run_filtered{suffix}", tmp_path)
                await pilot.press("K")  # on the running cell: D_ens
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                            and QUESTION in screen_text(app), what="the question")
                await _still(pilot, screen)
                assert app.screen.question.endswith(" 2 of them hidden by the filter.")
                await await_snapshot(pilot, app, f"run_bulk_skip{suffix}", tmp_path)
                await pilot.press("n")
            assert not (run / "control").exists()  # cancelled: nothing sent

    try:
        asyncio.run(scenario())
    finally:
        monkeypatch.undo()
        time.tzset()
