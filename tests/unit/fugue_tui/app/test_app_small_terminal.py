"""80x24 and 100x30 are supported sizes: every screen of the committed recording rendered
there (SVG snapshots beside the 150x48 ones of test_app_snapshots.py), with what must still
be readable asserted — the newest event, the selected cell's jobs, whole column headers —
and the run screen's pane zoom (z) showing each pane alone, the monitor included."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.events import read_events
from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot, install

SMALL, MEDIUM = (80, 24), (100, 30)


@pytest.fixture(autouse=True)
def pinned(tmp_path, monkeypatch):
    """UTC, colour on, no user keymap or datasets, a private working folder."""
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


async def _settle(pilot, predicate, what: str):
    value = await until(pilot, predicate, timeout=20, what=what)
    before = None
    for _ in range(40):
        await pilot.pause(0.3)
        now = screen_text(pilot.app)
        if now == before:
            break
        before = now
    return value


@pytest.mark.parametrize("size", [SMALL, MEDIUM], ids=["80x24", "100x30"])
def test_run_screen_at_small_sizes(tmp_path, size):
    runs = install(tmp_path)
    run = runs / "speed"
    last = max(e["ts"] for e in read_events(run / "runner.jsonl"))

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: last + 10)
        async with app.run_test(size=size) as pilot:
            screen = await _settle(pilot, lambda: isinstance(app.screen, RunScreen)
                                   and app.screen.query_one(CellTable).row_count == 20
                                   and app.screen, "the 20 cells")
            assert screen.has_class("-compact")
            await pilot.press("g")
            await until(pilot, lambda: "D_ens_ens_s0" in screen_text(app), what="the jobs")
            await pilot.pause(0.5)
            text = screen_text(app)
            assert "campaign finished" in text  # the newest event, not cut
            assert "cells 20/20" in text
            for header in (" exp ", "executor", "state", "note"):  # compact headers, whole
                assert header in text
            await await_snapshot(pilot, app, f"run_recorded_{size[0]}x{size[1]}", tmp_path)

            if size != SMALL:
                return  # the zoom once, at the smallest size
            # z: each pane alone, the monitor's charts included (hidden when compact)
            seen = {}
            for pane in ("cells", "jobs", "monitor", "log", "events", ""):
                await pilot.press("z")
                await until(pilot, lambda pane=pane: screen.zoomed == pane, what=pane)
                await pilot.pause(0.6)
                seen[pane] = screen_text(app)
            assert "D_ens_ens_s0" in seen["jobs"] and "executor" not in seen["jobs"]
            assert "CPU % of one core" in seen["monitor"] and "last" in seen["monitor"]
            assert "campaign finished, exit code 0" in seen["events"]
            assert "executor" in seen["cells"] and "D_ens_ens_s0" not in seen["cells"]
            assert "executor" in seen[""] and "D_ens_ens_s0" in seen[""]

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [SMALL, MEDIUM], ids=["80x24", "100x30"])
def test_plan_screen_small_every_field_in_reach(tmp_path, monkeypatch, size):
    """The plan at 80x24: settings reachable with tab in the order shown, checkboxes whose
    state reads without colour."""
    from engine import plugins

    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.delenv("FUGUE_PLUGINS", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    from engine.selfcheck import store  # the title's self-check line: never run here

    monkeypatch.setattr(store, "latest", lambda *args, **kwargs: None)

    async def scenario():
        app = FugueApp(runs_dir="runs", clock=lambda: 1_800_000_000.0)
        async with app.run_test(size=size) as pilot:
            await _settle(pilot, lambda: isinstance(app.screen, PlanScreen)
                          and "D_reg" in screen_text(app)
                          and "select at least one" in screen_text(app), "the catalogue")
            await await_snapshot(pilot, app, f"plan_{size[0]}x{size[1]}", tmp_path)
            plan = app.screen
            # the order tab walks (Textual's focus chain), every field of the form in it
            order = [w.id for w in plan.focus_chain]
            await pilot.press("tab")  # from the catalogue straight to the form's first field
            assert app.focused.id == order[order.index("catalogue") + 1] == "f-name"
            form_ids = [w.id for w in plan.form.query("Input, Select, Checkbox")]
            assert [i for i in order if i in form_ids] == form_ids
            assert order.index("f-name") < order.index("exec-seq")  # settings first
            # ticked and not ticked differ in characters, not only in colour
            ticked = plan.form.query_one("#exec-seq").render()
            unticked = plan.form.query_one("#exec-mp").render()
            assert ticked.plain.startswith("▐X▌"), ticked.plain
            assert unticked.plain.startswith("▐ ▌"), unticked.plain

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [SMALL, MEDIUM], ids=["80x24", "100x30"])
def test_results_screen_small(tmp_path, size):
    """The figures at 80 columns: bars numbered, each label whole under its chart; the
    killed rows' reason in the table."""
    from fugue_tui.app.screens.results import ResultsScreen

    install(tmp_path)

    async def scenario():
        app = FugueApp(results="runs")
        async with app.run_test(size=size) as pilot:
            screen = await _settle(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                   and app.screen.results is not None and app.screen,
                                   "the rows")
            assert screen.has_class("-compact")
            figures = screen.query_one("#figures").content.plain
            assert "\n1  D_ens unified_model vf:1,s:0,fl:0 1.035 [0.591, 1.614]" in figures
            assert "e+" not in figures
            await await_snapshot(pilot, app, f"results_{size[0]}x{size[1]}", tmp_path)

    asyncio.run(scenario())
