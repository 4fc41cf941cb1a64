"""The run screen on a recorded run folder (no runner): rows, earlier attempts, numbers,
monitor charts, only changed table cells rewritten, and only applicable commands offered."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.device_charts import DeviceCharts
from tests.app_screen import screen_text, until

T0 = 1_800_000_000.0


def _write(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        for event in events:
            out.write(json.dumps({"v": 1, **event}) + "\n")


def recorded_run(root: Path) -> Path:
    """A finished two-cell campaign: cell 1 hung, was retried and then finished; cell 2 ok.
    Cell 1's second attempt has CPU monitor samples (no GPU)."""
    run = root / "runs" / "rec"
    cells = run / "cells"
    a1 = cells / "001-X_block-seq-p1-aaaaaaaa" / "attempt-1"
    a2 = cells / "001-X_block-seq-p1-aaaaaaaa" / "attempt-2"
    b1 = cells / "002-D_ens-seq-p1-bbbbbbbb" / "attempt-1"

    def runner(kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "campaign": "rec", **fields}

    def cell(key, attempt, kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "cell": key, "attempt": attempt, **fields}

    lab1, lab2 = "X_block seq pass 1", "D_ens seq pass 1"
    _write(a1 / "events.jsonl", [cell("a" * 16, 1, "started", 1, jobs=["X_block_s0"]),
                                 cell("a" * 16, 1, "job_started", 2, job_id="X_block_s0")])
    (a1 / "cell.log").write_text("first attempt\nblocked in forward\n")
    _write(a2 / "events.jsonl", [
        cell("a" * 16, 2, "started", 21, jobs=["X_block_s0"]),
        cell("a" * 16, 2, "sample", 22, t=100.0, cpu_pct=95.0, rss_mib=310.0,
             gpu_util_pct=None, mem_used_mib=None),
        cell("a" * 16, 2, "sample", 23, t=101.0, cpu_pct=97.5, rss_mib=320.0,
             gpu_util_pct=None, mem_used_mib=None),
        cell("a" * 16, 2, "job_started", 22, job_id="X_block_s0"),
        cell("a" * 16, 2, "job_progress", 23, job_id="X_block_s0", epoch=1, epochs=1, step=9,
             steps=9, samples=144, loss=0.5123, elapsed=0.8, epoch_end=True, train_sps=180.0,
             val_loss=0.6, val_acc=0.9421),
        cell("a" * 16, 2, "job_done", 24, job_id="X_block_s0", status="ok"),
        cell("a" * 16, 2, "summary", 24, T_group=1.2345, status="ok")])
    (a2 / "cell.log").write_text("second attempt\nall good\n")
    _write(b1 / "events.jsonl", [cell("b" * 16, 1, "summary", 30, T_group=0.5, status="ok")])
    _write(run / "runner.jsonl", [
        runner("campaign_started", 0, cells=2, device="cpu", run_dir=str(run), runner_pid=1,
               resume=False),
        runner("queued", 0, cell="a" * 16, index=1, label=lab1),
        runner("queued", 0, cell="b" * 16, index=2, label=lab2),
        runner("cell_started", 1, cell="a" * 16, index=1, label=lab1, attempt=1,
               events=str(a1 / "events.jsonl"), log_path=str(a1 / "cell.log"), pid=2),
        runner("suspect", 8, cell="a" * 16, attempt=1, seen="2 checks without progress"),
        runner("hung", 10, cell="a" * 16, attempt=1, seen="4 checks without progress",
               action="flag"),
        runner("control", 19, cmd="retry", cell="a" * 16, applied=True),
        runner("killed", 20, cell="a" * 16, attempt=1, reason="stopped for a retry by control "
                                                             "command"),
        runner("retried", 20, cell="a" * 16, attempt=2, manual=True),
        runner("cell_started", 21, cell="a" * 16, index=1, label=lab1, attempt=2,
               events=str(a2 / "events.jsonl"), log_path=str(a2 / "cell.log"), pid=3),
        runner("done", 25, cell="a" * 16, attempt=2, exit_code=0, error=""),
        runner("cell_started", 26, cell="b" * 16, index=2, label=lab2, attempt=1,
               events=str(b1 / "events.jsonl"), log_path=str(b1 / "cell.log"), pid=4),
        runner("done", 31, cell="b" * 16, attempt=1, exit_code=0, error=""),
        runner("campaign_done", 31, ok=True, exit_code=0, failed=0)])
    return run


def test_recorded_campaign_shows_rows_attempts_numbers_and_charts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=(150, 50)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            table = screen.query_one(CellTable)
            await until(pilot, lambda: table.row_count == 3, what="three rows")
            rows = [[str(v) for v in table.get_row_at(i)] for i in range(3)]
            assert rows == [
                ["1·1", "", "", "↳ earlier attempt", "killed", "1", "0:19", "–",
                 "stopped for a retry by control command"],
                ["1", "X_block", "seq", "pass 1", "done", "2", "0:04", "1.23 s", ""],
                ["2", "D_ens", "seq", "pass 1", "done", "1", "0:05", "0.50 s", ""]]
            text = screen_text(app)
            assert "campaign rec · cpu · elapsed 0:31 · cells 2/2: 2 done · finished (done, ok)" in text
            # select cell 1: its jobs, its monitor charts (no GPU: CPU and RSS of the tree)
            table.focus()
            await pilot.press("g", "j")
            await until(pilot, lambda: "0.942" in screen_text(app), what="cell 1's job row")
            text = screen_text(app)
            assert "X_block_s0" in text and "0.5123" in text and "100%" in text
            assert "X_block seq pass 1: manual retry, attempt 2" in text
            assert "CPU % of one core (cell process tree, no GPU)  last 97.5" in text
            assert "RSS MiB (cell process tree, no GPU)  last 320" in text
            # the selected attempt's log (read by the follow worker at its next poll)
            await until(pilot, lambda: "all good" in screen_text(app), what="the log")
            charts = screen.query_one(DeviceCharts)
            draws = charts.draws
            # nothing new: the table writes no cell and the charts do not redraw
            assert table.sync(screen.view.state, T0 + 40) == 0
            screen.dirty = True
            screen.refresh_view()
            assert charts.draws == draws
            # a finished campaign: no kill/retry/skip offered, back to the plan is
            titles = {c.title for c in app.get_system_commands(app.screen)}
            assert "plan" in titles and not {"kill+retry", "kill+skip", "kill"} & titles
            await pilot.press("r")  # not applicable: nothing opens
            assert isinstance(app.screen, RunScreen)
            await pilot.press("q")
        assert app.return_code == 0

    asyncio.run(scenario())


def test_the_cursor_follows_the_running_cell_until_the_user_moves_it(tmp_path, monkeypatch):
    """The selected row follows whichever cell runs (new rows, a retry's earlier-attempt row
    and the re-sort they cause do not count as the user's choice); a move by the user stops
    the following, ``f`` resumes it."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "live"
    labels = {"a": "D_ens seq pass 1", "b": "D_cv seq pass 1", "c": "D_reg seq pass 1"}

    def runner(kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "campaign": "live", **fields}

    def start(key, dt, attempt=1):
        attempt_dir = run / "cells" / key / f"attempt-{attempt}"
        (attempt_dir).mkdir(parents=True, exist_ok=True)
        (attempt_dir / "cell.log").write_text(f"{key} attempt {attempt}\n")
        return runner("cell_started", dt, cell=key * 16, index="abc".index(key) + 1,
                      label=labels[key], attempt=attempt, pid=10 + dt,
                      events=str(attempt_dir / "events.jsonl"),
                      log_path=str(attempt_dir / "cell.log"))

    _write(run / "runner.jsonl", [
        runner("campaign_started", 0, cells=3, device="cpu", run_dir=str(run), runner_pid=1,
               resume=False),
        *(runner("queued", 0, cell=k * 16, index=i + 1, label=labels[k])
          for i, k in enumerate("abc")),
        start("a", 1)])

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 60)
        async with app.run_test(size=(150, 50)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            table = screen.query_one(CellTable)

            async def selected(key, what):
                await until(pilot, lambda: table.selected_row_key() == key * 16, what=what)

            await selected("a", "cell a (running) selected")
            _write(run / "runner.jsonl", [
                runner("done", 5, cell="a" * 16, attempt=1, exit_code=0, error=""),
                start("b", 6)])
            await selected("b", "the cursor following cell b")

            def row_on_screen(label):
                return next((line for line in screen_text(app).splitlines()
                             if label in line and "│" in line), "")

            # the rows sync changed are repainted (only they are)
            await until(pilot, lambda: " done " in row_on_screen("D_ens ")
                        and " running " in row_on_screen("D_cv "), what="rows repainted")
            # a retry adds an earlier-attempt row and re-sorts: still following
            _write(run / "runner.jsonl", [
                runner("killed", 8, cell="b" * 16, attempt=1, reason="stopped for a retry"),
                runner("retried", 8, cell="b" * 16, attempt=2, manual=True),
                start("b", 9, attempt=2)])
            await until(pilot, lambda: table.row_count == 4, what="the earlier attempt's row")
            await selected("b", "cell b's new attempt still selected")
            assert screen.follow_running
            # the user moves: the cursor stays where they put it
            table.focus()
            await pilot.press("g")
            await selected("a", "the user's choice")
            _write(run / "runner.jsonl", [
                runner("done", 12, cell="b" * 16, attempt=2, exit_code=0, error=""),
                start("c", 13)])
            await until(pilot, lambda: screen.running_cell() is not None
                        and screen.running_cell().key == "c" * 16, what="cell c running")
            await pilot.pause(2 * 0.5 + 0.2)  # two redraws
            assert table.selected_row_key() == "a" * 16 and not screen.follow_running
            await pilot.press("f")  # follow again
            await selected("c", "the cursor following cell c again")
            assert screen.follow_running
            await pilot.press("q")

    asyncio.run(scenario())


def test_help_is_built_once_and_the_run_screen_rests_under_it(tmp_path, monkeypatch):
    """'?' shows the same installed help screen each time; while it covers the run screen,
    the run screen does not redraw (its repaints would repaint the help) and neither
    footer recomposes; closing the help brings the run screen back up to date."""
    from fugue_tui.app.screens.modals import HelpScreen
    from fugue_tui.app.widgets.footer import KeyFooter

    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 40)
        async with app.run_test(size=(150, 50)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            await until(pilot, lambda: screen.query_one(CellTable).row_count == 3, what="rows")
            footer = screen.query_one(KeyFooter)
            await until(pilot, lambda: footer.recomposes, what="the footer's keys")
            await pilot.pause(0.3)
            recomposes = footer.recomposes
            seen = []
            for _ in range(2):
                await pilot.press("question_mark")
                help_screen = await until(pilot, lambda: isinstance(app.screen, HelpScreen)
                                          and app.screen, what="the help")
                seen.append(help_screen)
                assert "run.follow" in screen_text(app)
                redraws = screen.redraws
                screen.dirty = True
                await pilot.pause(1.2)  # two redraw intervals
                assert screen.redraws == redraws
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is screen, what="the run screen")
                assert screen.redraws > redraws  # caught up at once
            assert seen[0] is seen[1]
            assert footer.recomposes == recomposes
            assert "finished (done, ok)" in screen_text(app)
            await pilot.press("q")

    asyncio.run(scenario())


def test_log_lines_held_while_hidden_are_bounded(tmp_path, monkeypatch):
    """While covered, the run screen keeps the log lines for its resume: a reset drops what
    came before it; beyond the pane's capacity the oldest go and the pane is cleared."""
    from fugue_tui.app.screens import run as run_module

    monkeypatch.setattr(run_module, "LOG_LINES", 5)
    screen = RunScreen(tmp_path, None)
    screen._hold_log(["a", "b"], False, "log: x")
    screen._hold_log(["c"], True, "log: y")  # a reset: a and b never show
    assert screen._hidden_log == [(["c"], True, "log: y")]
    screen._hold_log(["d", "e", "f"], False, "log: y")
    screen._hold_log(["g", "h"], False, "log: y")  # 6 > 5: c goes, d's feed clears the pane
    assert screen._hidden_log == [(["d", "e", "f"], True, "log: y"), (["g", "h"], False, "log: y")]
