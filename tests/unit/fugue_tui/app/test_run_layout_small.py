"""The run screen at 80x24 and 160x48 (issue 47, item 5; item 6's remainder): one header
line, the followed running cell in view after a live resize and a zoom cycle, the speedup
strip in whole items, a footer that ends cleanly, and the pane with the keys marked
``> `` as on the Results screen. Over the committed recording cut short in the middle of
cell 14 and opened as a live campaign (a runner handle that says it is alive)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import install

SMALL, LARGE = (80, 24), (160, 48)
#: The row of the running cell, as the cell table shows it (at any width).
RUNNING = re.compile(r"^\W*14\s+D_ens\s+unified_model\s+pass 4\s+running\s", re.M)


class AliveRunner:
    """A runner handle whose runner is alive (pid 4242): the screen names it."""

    pid = 4242

    def alive(self) -> bool:
        return True

    def exit_code(self) -> None:
        return None

    def output_tail(self, lines: int) -> str:
        return ""

    def stop(self, cell_pids=()) -> list[int]:
        return []


def live_copy(tmp_path: Path) -> tuple[Path, float]:
    """The recorded ``speed`` campaign as it was 20 s into cell 14 (of 20): every event
    file cut there. Returns its folder and that moment (Unix seconds)."""
    run = install(tmp_path) / "speed"
    started = next(e["ts"] for e in map(json.loads, (run / "runner.jsonl").open())
                   if e["type"] == "cell_started" and e["index"] == 14)
    cut = started + 20
    for path in run.rglob("*.jsonl"):
        kept = [line for line in path.read_text().splitlines(keepends=True)
                if json.loads(line)["ts"] <= cut]
        path.write_text("".join(kept))
    return run, cut


def _lines(app) -> list[str]:
    return screen_text(app).split("\n")


def test_running_cell_header_and_strip_at_80x24_after_a_resize_and_zooms(tmp_path,
                                                                           monkeypatch):
    """On main: the header wrapped (`` · runner pid 4242 (attached to)`` on a second line),
    the running cell 14 was off-screen after 160x48 → 80x24 and after a zoom cycle."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    run, cut = live_copy(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: cut + 5)
        async with app.run_test(size=LARGE) as pilot:
            app.open_run(run, AliveRunner(), 0, attached=True)
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and RUNNING.search(screen_text(app)), what="cell 14 running")
            screen = app.screen
            assert _lines(app)[0] == (" campaign speed · cpu · elapsed 8:56 · cells 13/20: "
                                      "13 done, 6 queued, 1 running · runner pid 4242 "
                                      "(attached to)")
            # the pane with the keys marked, as on the Results screen (item 6)
            assert "╭─ > cells ─" in screen_text(app) and "╭─ jobs ─" in screen_text(app)
            await pilot.resize_terminal(*SMALL)
            # the campaign line shortened to one line; the running cell still in view
            header = " campaign speed · cpu · 8:56 · cells 13/20: 13 done, 6 queued, 1 running"
            await until(pilot, lambda: _lines(app)[0] == header
                        and RUNNING.search(screen_text(app)),
                        what="one header line and cell 14 at 80x24")
            # the footer ends cleanly: whole keys, then the palette's, nothing after it
            footer = ("r kill+retry s kill+skip x kill f follow v campaign results d stacks "
                      "▏^p palette")
            await until(pilot, lambda: _lines(app)[-1] == footer, what="the footer")
            # each zoom: the pane that takes the keys marked (none for the monitor, events)
            marks = {"cells": "─> cells─", "jobs": "─> jobs─", "monitor": "─monitor: D_ens",
                     "log": "─> log: D_ens unified_model pass 4", "events": "07:57:38 D_ens",
                     "": "─> cells─"}
            for pane, mark in marks.items():
                await pilot.press("z")
                await until(pilot, lambda p=pane, m=mark: screen.zoomed == p
                            and m in screen_text(app), what=f"zoom {pane}: {mark}")
                assert screen_text(app).count("─> ") == (pane not in ("monitor", "events"))
            await until(pilot, lambda: RUNNING.search(screen_text(app)) and _lines(app)[0]
                        == header, what="cell 14 in view after the zoom cycle")
            table = screen.query_one(CellTable)
            assert table.selected_cell_key() == screen.running_cell().key  # still following
            # every column whole, the note too (no horizontal scrollbar); line 2 is the
            # host bar
            assert _lines(app)[2].startswith(" CPU ") or _lines(app)[2].startswith(" host ")
            assert _lines(app)[4].split() == ["#", "exp", "executor", "config", "state", "try",
                                              "elapsed", "T_group", "note"], _lines(app)[4]
            # nothing wraps: the strip, one line of whole items, under the header
            strip = " so far: D_ens unified_model 1.03× · D_cv unified_model 1.03× · ETA ~4:14 ±1:15"
            await until(pilot, lambda: _lines(app)[1] == strip, what="the strip at 80x24")
            await pilot.press("tab")  # the keys to the jobs: marked, the cells not
            await until(pilot, lambda: "─> jobs─" in screen_text(app)
                        and "─cells─" in screen_text(app), what="the jobs marked")
            await pilot.press("shift+tab")
            await pilot.resize_terminal(*LARGE)
            await until(pilot, lambda: _lines(app)[0].endswith("runner pid 4242 (attached to)")
                        and RUNNING.search(screen_text(app)), what="back at 160x48")

    asyncio.run(scenario())


def test_strip_at_80_columns_drops_the_cores_before_whole_items():
    """On main the cores behind each ratio stayed while items went: one item and +3 more
    at 80 columns; the ratios alone fit two."""
    from fugue_tui.app.models.so_far import fit_strip

    parts = [("D_ens unified_model", "1.55× on 0.91 cores", "[1.21, 1.90]"),
             ("D_ens mp", "0.55× on 0.54 cores", "[0.41, 0.70]"),
             ("D_ens ray", "1.38× on 1.48 cores", "[1.10, 1.60]"),
             ("D_cv unified_model", "1.03× on 0.95 cores", "[0.90, 1.10]")]
    assert fit_strip(parts, None, 78) == ("so far: D_ens unified_model 1.55× · D_ens mp 0.55× · "
                                          "+2 more (v: results)")
    # room enough: the cores stay
    assert fit_strip(parts, None, 158) == " · ".join(
        ["so far: D_ens unified_model 1.55× on 0.91 cores", "D_ens mp 0.55× on 0.54 cores",
         "D_ens ray 1.38× on 1.48 cores", "D_cv unified_model 1.03× on 0.95 cores"])
