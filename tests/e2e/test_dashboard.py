"""The dashboard end to end: real runner and cell processes (CPU, one torch thread), driven
through the keyboard with Textual's pilot: launch a campaign and see its rows and numbers
land; a hung cell flagged, retried and skipped; quit-and-detach, attach again, quit-and-stop
leaving no process; and one run in a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from engine.events import read_events
from engine.observe.state import rebuild
from engine.results.read import read_rows
from fugue_tui.app.app import FugueApp
from fugue_tui.app.process import find_runner
from fugue_tui.app.screens.modals import ConfirmScreen, QuitScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.e2e.conftest import (
    PLUGINS,
    X_BLOCK,
    X_SLOW,
    campaign_text,
    gone,
    plugin_vars,
)

pytestmark = pytest.mark.slow

SIZE = (150, 48)
#: Generous: a cell imports torch first, on a small shared CPU.
CELL_S = 150.0

EXPERIMENTS = "\n[experiments.D_ens]\nepochs = 1\nk = 2\n" + X_BLOCK + X_SLOW
#: Hung after about two seconds without progress; no action: the dashboard flags.
WATCHDOG = """
[watchdog]
interval_s = 0.5
suspect_after = 2
hung_after = 4
"""


@pytest.fixture
def work(tmp_path, monkeypatch, data_dir):
    """A working folder with the short experiments, the test plugin for this process and
    the runner it starts, no datasets and no user keymap."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(PLUGINS))
    for name, value in plugin_vars().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUGUE_REGISTRY_DIR", raising=False)
    monkeypatch.setenv("FUGUE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "experiments.toml").write_text(EXPERIMENTS)
    yield tmp_path
    # A test that fails after detaching leaves a headless runner (and its cells) behind:
    # stop every runner of this folder so no process outlives the test.
    for pid_file in tmp_path.glob("runs/*/runner.pid"):
        handle = find_runner(pid_file.parent)
        if handle is not None:
            _stop_tree(handle.pid)


def _stop_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return
    sessions = {p.pid for p in procs}
    for proc in psutil.process_iter():  # cells run in sessions of their own
        try:
            if os.getsid(proc.pid) in sessions:
                procs.append(proc)
        except (OSError, psutil.Error):
            continue
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def campaign(work: Path, name: str, experiments: str, extra: str = "") -> Path:
    path = work / f"{name}.toml"
    path.write_text(campaign_text(name, experiments, extra=extra))
    return path


def rows(screen: RunScreen) -> dict[str, list[str]]:
    """Table rows by their first column (``1``, ``1·1`` for an earlier attempt)."""
    table = screen.query_one(CellTable)
    out = {}
    for i in range(table.row_count):
        values = [str(v) for v in table.get_row_at(i)]
        out[values[0]] = values
    return out


async def launch(pilot) -> RunScreen:
    app = pilot.app
    plan = app.screen
    # the preview settled (no edit being previewed: a launch then says "not ready yet")
    await until(pilot, lambda: plan.result is not None and plan.result.cells and
                plan.source_path is not None and not plan._debounce_pending(),
                what="the loaded campaign's preview")
    await pilot.press("ctrl+r")
    # The launch parses the campaign, checks the runs folder and starts the runner in a
    # worker thread: seconds on a loaded 2-core host (a CI run once needed over 10 s).
    return await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen,
                       timeout=30.0, what="the run screen")


def lifecycle(state) -> dict:
    """What the cell table shows of a campaign state, per cell."""
    return {key: (c.index, c.state, c.attempt, c.pid, c.started_ts, c.error, c.history)
            for key, c in state.cells.items()} | {"": (state.campaign, state.runner_pid)}


def test_launch_a_small_campaign_and_see_rows_and_numbers_land(work):
    path = campaign(work, "dash-run", "D_ens")

    async def scenario():
        app = FugueApp(campaign=str(path))
        async with app.run_test(size=SIZE) as pilot:
            screen = await launch(pilot)
            # A forked cell (the zygote) can end before a frame shows it running: either
            # state proves the launch reached the cell.
            await until(pilot, lambda: "1" in rows(screen)
                        and rows(screen)["1"][4] in ("running", "done"),
                        timeout=30, what="the cell running")
            await until(pilot, lambda: "· finished (" in screen_text(app), timeout=CELL_S,
                        what="the campaign to finish")
            text = screen_text(app)
            group = read_rows(work / "runs" / "master_groups.csv")
            assert [(g["exp_id"], g["status"], g["attempt"]) for g in group] == [
                ("D_ens", "ok", "1")]
            row = rows(screen)["1"]
            assert row[1:6] == ["D_ens", "seq", "pass 1", "done", "1"]
            assert row[7] == f"{float(group[0]['T_group']):.2f} s"
            assert "cells 1/1: 1 done · finished (done, ok)" in text
            # the job pane shows each job's last reported loss and validation accuracy
            events = read_events(next((work / "runs" / "dash-run" / "cells").glob(
                "*/attempt-1/events.jsonl")))
            last = {e["job_id"]: e for e in events if e["type"] == "job_progress"
                    and e.get("epoch_end")}
            assert set(last) == {"D_ens_ens_s0", "D_ens_ens_s1"}
            for job_id, event in last.items():
                line = next(ln for ln in text.splitlines() if job_id in ln)
                assert f"{event['loss']:.4f}" in line and f"{event['val_acc']:.3f}" in line
                assert "100%" in line
            await pilot.press("q")  # the campaign ended: no question asked
        assert app.return_code == 0
        resolved = json.loads((work / "runs" / "dash-run" / "campaign.resolved.json").read_text())
        assert resolved["campaign"]["watchdog"]["action"] == "flag"
        assert find_runner(work / "runs" / "dash-run") is None

    asyncio.run(scenario())


def test_hung_cell_retried_detach_attach_skip_then_stop_leaves_no_process(work):
    """One campaign through every keyboard flow of a running campaign (one set of cell
    processes, to keep the suite short): the blocking cell is flagged hung, killed and
    retried (attempt 1 stays visible as killed); the dashboard detaches and the runner keeps
    going; a new dashboard attaches and rebuilds the same state; the hung cell is killed and
    skipped and the queue goes on; quitting with "stop" leaves no process."""
    path = campaign(work, "dash-hung", "X_block,X_slow", WATCHDOG)
    run_dir = work / "runs" / "dash-hung"

    async def first() -> tuple[FugueApp, RunScreen]:
        app = FugueApp(campaign=str(path))
        async with app.run_test(size=SIZE) as pilot:
            screen = await launch(pilot)
            await until(pilot, lambda: rows(screen).get("1", [""] * 9)[4] == "hung",
                        timeout=CELL_S, what="the first attempt flagged hung")
            assert rows(screen)["1"][8].startswith("4 checks without progress")
            assert rows(screen)["2"][4] == "queued"
            screen.query_one(CellTable).focus()
            await pilot.press("r")
            dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and
                                 app.screen, what="the confirmation")
            assert "Kill 'X_block seq pass 1' (attempt 1) and run it again now?" in \
                screen_text(app)
            await pilot.press("y")
            assert not dialog.is_current
            await until(pilot, lambda: rows(screen).get("1·1", [""] * 9)[4] == "killed" and
                        rows(screen)["1"][4:6] == ["hung", "2"], timeout=CELL_S,
                        what="attempt 1 killed, attempt 2 hung")
            assert "stopped for a retry" in rows(screen)["1·1"][8]
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question")
            assert "Stop it" in screen_text(app) and "detach" in screen_text(app)
            await pilot.press("d")
        return app, screen

    app, detached = asyncio.run(first())
    assert app.farewell.startswith("detached: campaign dash-hung keeps running")
    assert f"fugue-tui dashboard --attach {Path('runs') / 'dash-hung'}" in app.farewell
    runner = find_runner(run_dir)
    assert runner is not None and runner.pid == detached.handle.pid  # still running headless
    hung = next(c for c in detached.view.state.cells.values() if c.index == 1)
    assert hung.pid and not gone(hung.pid)

    async def second() -> tuple[FugueApp, int]:
        app = FugueApp(attach=str(run_dir))
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and
                                 app.screen, what="the attached run screen")
            await until(pilot, lambda: rows(screen).get("1", [""] * 9)[4:6] == ["hung", "2"],
                        what="the same hung cell")
            # the state rebuilt from the event files is the one the first dashboard had (the
            # cells keep streaming monitor samples, so compare what the table shows)
            assert lifecycle(screen.view.state) == lifecycle(detached.view.state) == \
                lifecycle(rebuild(run_dir))
            assert rows(screen)["1·1"][4] == "killed"
            assert f"runner pid {runner.pid} (attached to)" in screen_text(app)
            screen.query_one(CellTable).focus()
            screen.query_one(CellTable).select_cell(hung.key)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
            assert "Kill 'X_block seq pass 1' (attempt 2) and skip it? The queue goes on." in \
                screen_text(app)
            await pilot.press("y")
            await until(pilot, lambda: rows(screen).get("2", [""] * 9)[4] == "running",
                        timeout=CELL_S, what="the queue to go on")
            table = rows(screen)
            assert table["1"][4:6] == ["killed", "2"] and "skipped by control" in table["1"][8]
            assert table["1·1"][4] == "killed" and table["2"][1] == "X_slow"
            slow_pid = next(c.pid for c in screen.view.state.cells.values() if c.index == 2)
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question")
            await pilot.press("s")
            await until(pilot, lambda: app.farewell, timeout=90, what="the runner to stop")
        return app, slow_pid

    app2, slow_pid = asyncio.run(second())
    assert app2.farewell == "stopped campaign dash-hung: no runner or cell process is left"
    assert gone(runner.pid) and gone(hung.pid) and gone(slow_pid)
    detached.handle.proc.wait(timeout=10)  # this process started it: reap it
    # Stop aborts through the control folder: recorded as the dashboard's, not a Ctrl-C
    assert detached.handle.proc.returncode == 3
    kinds = [e["type"] for e in read_events(run_dir / "runner.jsonl")]
    assert kinds[-2:] == ["campaign_aborted", "campaign_done"]
    groups = read_rows(work / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"], g["attempt"]) for g in groups] == [
        ("X_block", "killed", "1"), ("X_block", "killed", "2"), ("X_slow", "killed", "1")]
    assert "skipped by control command" in groups[1]["error"]
    assert "stopped from the dashboard" in groups[2]["error"]
    assert "Ctrl-C" not in groups[2]["error"]
