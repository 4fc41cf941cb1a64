"""Issue 47 item 10, the smaller defects a first-time user hit, each pinned by a test that
failed before its fix: `d` with nothing to dump said nothing; …"""

from __future__ import annotations

import asyncio

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import until
from tests.unit.fugue_tui.app.test_app_run_screen import T0, recorded_run

SIZE = (150, 48)


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
