"""The run screen's filter, bulk commands and alerts under the Pilot (issue 48, items 3 and
4), over a live campaign of seven cells (a runner handle that says it is alive): two
failed, one running, three queued. ``F`` filters by status, executor and experiment from a
picker and the pane's title counts; ``R`` and ``K`` ask once, naming the count, and then
drop exactly one control command file per cell (cancel: none); a cell turning suspect or
hung rings the bell and notifies once, also under the help; a bad ``[alerts]`` value is
one line and the defaults stay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.console import Console
from textual.widgets import OptionList

from fugue_tui.app.alerts import AlertSettings
from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.modals import ConfirmScreen, HelpScreen, help_text
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.screens.run_filter import ChoicePicker
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until

T0 = 1_800_000_000.0
LABELS = ["D_ens seq pass 1", "D_ens unified_model pass 1", "D_cv seq pass 1",
          "D_cv unified_model pass 1", "D_ens seq pass 2", "D_ens unified_model pass 2",
          "D_cv seq pass 2"]


class AliveRunner:
    """A runner handle whose runner is alive."""

    pid = 4242

    def alive(self) -> bool:
        return True

    def exit_code(self) -> None:
        return None

    def output_tail(self, lines: int) -> str:
        return ""

    def stop(self, cell_pids=()) -> list[int]:
        return []


def key(index: int) -> str:
    return f"{index:x}" * 16


def _append(run: Path, *events: dict) -> None:
    with open(run / "runner.jsonl", "a") as out:
        for event in events:
            out.write(json.dumps({"v": 1, "campaign": "bulk", **event}) + "\n")


def live_campaign(root: Path) -> Path:
    """Cell 1 done, 2 and 3 failed, 4 running, 5 to 7 queued."""
    run = root / "runs" / "bulk"
    run.mkdir(parents=True)
    _append(run, {"ts": T0, "type": "campaign_started", "cells": 7, "device": "cpu",
                  "run_dir": str(run), "runner_pid": 4242, "resume": False},
            *({"ts": T0, "type": "queued", "cell": key(i), "index": i, "label": label}
              for i, label in enumerate(LABELS, start=1)))
    for i, end in ((1, "done"), (2, "failed"), (3, "failed"), (4, None)):
        attempt = run / "cells" / f"{i:03d}" / "attempt-1"
        attempt.mkdir(parents=True)
        (attempt / "cell.log").write_text(f"cell {i}\n")
        _append(run, {"ts": T0 + i, "type": "cell_started", "cell": key(i), "index": i,
                      "label": LABELS[i - 1], "attempt": 1, "pid": 100 + i,
                      "events": str(attempt / "events.jsonl"),
                      "log_path": str(attempt / "cell.log")})
        if end:
            _append(run, {"ts": T0 + i + 0.5, "type": end, "cell": key(i), "attempt": 1,
                          "exit_code": 0 if end == "done" else 1,
                          "error": "" if end == "done" else "boom"})
    return run


def _sent(run: Path) -> list[tuple[str, str]]:
    inbox = run / "control"
    files = sorted(inbox.glob("*.json")) if inbox.is_dir() else []
    return [(body["cmd"], body["cell"]) for body in map(json.loads, map(Path.read_text, files))]


def _rows(table: CellTable) -> list[str]:
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def _open(pilot, app, run) -> RunScreen:
    screen = app.open_run(run, AliveRunner(), 0, attached=True)
    await until(pilot, lambda: screen.is_current and screen.runner_alive
                and [t.row_count for t in screen.query(CellTable)] == [7], what="the 7 cells")
    return screen


async def _pick(pilot, app, option: str) -> None:
    """Open the filter picker (F) and pick ``option`` by moving to it."""
    await pilot.press("F")
    picker = await until(pilot, lambda: isinstance(app.screen, ChoicePicker) and app.screen,
                         what="the filter picker")
    options = picker.query_one(OptionList)
    index = next(i for i in range(options.option_count)
                 if options.get_option_at_index(i).id == option)
    await pilot.press(*["down"] * (index - (options.highlighted or 0)), "enter")


def test_filter_by_each_field_and_bulk_retry_and_skip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    run = live_campaign(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: T0 + 20)
        async with app.run_test(size=(160, 48)) as pilot:
            screen = await _open(pilot, app, run)
            table = screen.query_one(CellTable)
            assert "╭─ > cells ─" in screen_text(app)  # no filter: the title as before
            # each new key in the palette (what applies now) and in the help, by its id
            offered = {c.title for c in app.get_system_commands(screen)}
            assert {"filter", "retry failed", "skip queued of exp"} <= offered
            ids = {line.split()[-1] for line in
                   help_text(Console(width=146), {}, 146).plain.splitlines() if line.strip()}
            assert {"run.filter", "run.retry-failed", "run.skip-queued"} <= ids
            title = "cells · status:failed · 2 of 7 cells + 1 running"
            await _pick(pilot, app, "status=failed")
            await until(pilot, lambda: title in screen_text(app), what=title)
            assert _rows(table) == ["2", "3", "4"]  # the running cell stays reachable
            # the rows above it gone: the cursor still on the followed running cell
            assert table.selected_cell_key() == key(4) and screen.follow_running
            repaints = table.row_repaints
            screen.dirty = True
            screen.refresh_view()  # a redraw under the filter: no row rebuilt or repainted
            assert table.last_updates == 0 and table.row_repaints == repaints
            await _pick(pilot, app, "status=failed")  # picked again: dropped
            await _pick(pilot, app, "executor=unified_model")
            title = "cells · executor:unified_model · 3 of 7 cells"
            await until(pilot, lambda: title in screen_text(app), what=title)
            assert _rows(table) == ["2", "4", "6"]
            await _pick(pilot, app, "experiment=D_cv")
            title = "cells · executor:unified_model exp:D_cv · 1 of 7 cells"
            await until(pilot, lambda: title in screen_text(app), what=title)
            assert _rows(table) == ["4"]
            screen.dirty = True
            screen.refresh_view()  # a redraw later: still following (no move of the user's)
            assert table.selected_cell_key() == key(4) and screen.follow_running
            await _pick(pilot, app, "clear")
            await until(pilot, lambda: table.row_count == 7
                        and "╭─ > cells ─" in screen_text(app), what="every cell again")
            # R: one question naming the count; cancel sends nothing
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                        and "Retry 2 failed cells?" in screen_text(app), what="the question")
            await pilot.press("n")
            await until(pilot, lambda: app.screen is screen, what="cancelled")
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked")
            await pilot.press("y")
            await until(pilot, lambda: any("sent retry for 2 cells" in n.message
                                           for n in app._notifications), what="sent")
            assert _sent(run) == [("retry", key(2)), ("retry", key(3))]
            # K on a queued D_ens cell: its experiment's queued cells, 5 and 6 (not 7)
            assert table.selected_cell_key() == key(4)  # the running cell, followed
            await pilot.press("down")  # the user's move: cell 5 stays selected
            await until(pilot, lambda: table.selected_cell_key() == key(5), what="cell 5")
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                        and "Skip 2 queued cells of D_ens?" in screen_text(app),
                        what="the skip question")
            await pilot.press("y")
            await until(pilot, lambda: any("sent skip for 2 cells" in n.message
                                           for n in app._notifications), what="skips sent")
            assert _sent(run)[2:] == [("skip", key(5)), ("skip", key(6))]
            # the runner takes them: cell 5 skipped leaves a status:queued filter's rows
            await _pick(pilot, app, "status=queued")
            await until(pilot, lambda: _rows(table) == ["4", "5", "6", "7"], what="queued")
            _append(run, {"ts": T0 + 9, "type": "skipped", "cell": key(5), "index": 5,
                          "label": LABELS[4], "reason": "control"})
            title = "cells · status:queued · 2 of 7 cells + 1 running"
            await until(pilot, lambda: title in screen_text(app)
                        and _rows(table) == ["4", "6", "7"], what="cell 5 gone")

    asyncio.run(scenario())


def test_alerts_ring_and_notify_once_also_under_another_screen(tmp_path, monkeypatch):
    """Under the help: cell 4 turns suspect (bell and notification), more of its events
    (nothing more), hung (again, once). A bad [alerts] value in the keymap file: one line
    naming the key, the defaults kept (both on); turned off: nothing."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    (config / "keymap.toml").write_text('[alerts]\nbell = "yes"\n')
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(config))
    run = live_campaign(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: T0 + 20)
        bells: list[float] = []
        app.bell = lambda: bells.append(1)  # the terminal bell, counted
        async with app.run_test(size=(160, 48)) as pilot:
            bad = [n for n in app._notifications if "alerts" in n.message]
            assert [n.message for n in bad] == [
                f"{config / 'keymap.toml'}: alerts.bell: expected true or false, got 'yes'"]
            assert app.alert_settings == AlertSettings(bell=True, notify=True)
            screen = await _open(pilot, app, run)
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")

            def alerts() -> list[str]:
                return [n.message for n in app._notifications if n.title == "watchdog"]

            _append(run, {"ts": T0 + 10, "type": "suspect", "cell": key(4), "attempt": 1,
                          "seen": "2 checks without progress"})
            line = "cell 4 D_cv unified_model pass 1 is suspect (attempt 1): 2 checks"
            await until(pilot, lambda: alerts() and line in alerts()[0], what="the alert")
            assert bells == [1]
            _append(run, {"ts": T0 + 11, "type": "suspect", "cell": key(4), "attempt": 1,
                          "seen": "3 checks without progress"},
                    {"ts": T0 + 12, "type": "hung", "cell": key(4), "attempt": 1,
                     "seen": "4 checks without progress", "action": "flag"})
            await until(pilot, lambda: len(alerts()) == 2, what="the hung alert")
            assert "is hung (attempt 1): 4 checks" in alerts()[1] and len(bells) == 2
            assert isinstance(app.screen, HelpScreen)  # it came over the other screen
            # off by config: nothing for cell 1's retry turning suspect
            screen.alerts.settings = AlertSettings(bell=False, notify=False)
            _append(run, {"ts": T0 + 13, "type": "cell_started", "cell": key(2), "index": 2,
                          "label": LABELS[1], "attempt": 2, "pid": 200},
                    {"ts": T0 + 14, "type": "suspect", "cell": key(2), "attempt": 2,
                     "seen": "2 checks without progress"})
            await until(pilot, lambda: screen.model.view.state.cells[key(2)].state
                        == "suspect", what="cell 2 suspect")
            await pilot.pause(0.3)
            assert len(alerts()) == 2 and len(bells) == 2

    asyncio.run(scenario())
