"""Warnings reach the user as they happen: a cell's ``warning`` events (an executor's, e.g.
Ray Tune's pruning warnings; a results file repaired or upgraded) and the runner's are kept
by the one reducer (``engine.observe.state``), printed on stderr by ``--batch`` (plain or
live), noted in the live view and shown on the dashboard's run screen (job pane, recent
lines, a notification)."""

from __future__ import annotations

import asyncio
import io
import json

from rich.console import Console

from engine.observe.state import CampaignState
from fugue_tui.console.live import LiveProgress
from fugue_tui.console.plain import PlainProgress
from fugue_tui.live.view import LiveView
from tests.app_screen import screen_text, until

T0 = 1_800_000_000.0
KEY = "a" * 16
LABEL = "D_ens ray pass 1"
TUNE = ("ray tune: ASHA cannot prune with max_t = 2 epochs and grace_period = 1 (no rung "
        "between them): every trial runs all its epochs")
REPAIR = ("runs/master_groups.csv: its incomplete last line (a write cut off) was removed; "
          "the file as it was is kept in runs/master_groups.csv.bak-20270115-080000")


def runner(kind: str, dt: float, **fields) -> dict:
    return {"v": 1, "ts": T0 + dt, "type": kind, "campaign": "w", **fields}


def cell(kind: str, dt: float, attempt: int = 1, **fields) -> dict:
    return {"v": 1, "ts": T0 + dt, "type": kind, "cell": KEY, "attempt": attempt, **fields}


def stream(events_file: str = "e.jsonl", log: str = "cell.log") -> list[dict]:
    """A campaign of one ray cell that warns while it trains, then a repair the runner told."""
    return [
        runner("campaign_started", 0, cells=1, device="cpu", run_dir="runs/w", runner_pid=1,
               resume=False),
        runner("queued", 0, cell=KEY, index=1, label=LABEL),
        runner("cell_started", 1, cell=KEY, index=1, label=LABEL, attempt=1,
               events=events_file, log_path=log, pid=2),
        cell("started", 2, pid=2, exp_id="D_ens", executor="ray", jobs=["D_ens_m0"]),
        cell("job_started", 3, job_id="D_ens_m0"),
        cell("warning", 4, message=TUNE),
        cell("job_progress", 5, job_id="D_ens_m0", epoch=1, epochs=2, step=3, steps=9,
             samples=48, loss=0.9, elapsed=1.0),
    ]


# --------------------------------------------------------------------------- the reducer

def test_the_state_keeps_a_cells_warnings_as_they_come_and_the_runners():
    state = CampaignState()
    for event in stream():
        state.apply(event)
    assert state.cells[KEY].warnings == [TUNE]  # while the cell still trains
    state.apply(cell("summary", 6, group_id="ray_1", status="ok", error="", T_group=2.0,
                     warnings=["host load average 3.1 on 2 cores: the machine was busy"]))
    assert state.cells[KEY].warnings == [
        TUNE, "host load average 3.1 on 2 cores: the machine was busy"]
    state.apply(runner("warning", 7, message=REPAIR, cell=KEY, attempt=1))
    assert state.warnings == [REPAIR] and state.cells[KEY].warnings[-1] == REPAIR
    state.apply(cell("warning", 8, attempt=0, message="a stale attempt's"))
    assert "a stale attempt's" not in state.cells[KEY].warnings


# --------------------------------------------------------------------------- --batch

def test_plain_batch_prints_each_warning_on_stderr_as_it_comes(capsys):
    progress = PlainProgress(1, stream=io.StringIO())
    for event in stream():
        progress(event)
    assert capsys.readouterr().err == f"fugue-tui: warning: {LABEL}: {TUNE}\n"
    progress(runner("warning", 7, message=REPAIR))
    assert capsys.readouterr().err == f"fugue-tui: warning: {REPAIR}\n"
    assert "warning" not in progress.stream.getvalue()  # stdout keeps its lines


def test_the_live_view_notes_warnings_and_prints_them_on_stderr(capsys):
    console = Console(file=io.StringIO(), width=120, color_system=None)
    progress = LiveProgress(1, console, clock=lambda: T0 + 6)
    for event in stream():
        progress(event)
    assert capsys.readouterr().err == f"fugue-tui: warning: {LABEL}: {TUNE}\n"
    view: LiveView = progress.view
    assert any(line.endswith(f"{LABEL}: warning: {TUNE}") for line in view.recent)
    shown = Console(file=io.StringIO(), width=400, color_system=None)
    shown.print(view.render())
    assert f"warning: {TUNE}" in shown.file.getvalue()  # under the running cell


# --------------------------------------------------------------------------- dashboard

def test_the_run_screen_shows_a_warning_while_the_cell_runs(tmp_path, monkeypatch):
    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.screens.run import RunScreen

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "w"
    attempt = run / "cells" / "001-D_ens-ray-p1-aaaaaaaa" / "attempt-1"
    attempt.mkdir(parents=True)
    (attempt / "cell.log").write_text("training\n")
    events = stream(str(attempt / "events.jsonl"), str(attempt / "cell.log"))
    with open(run / "runner.jsonl", "w") as out:
        out.writelines(json.dumps(e) + "\n" for e in events if "campaign" in e)
        out.write(json.dumps(runner("warning", 5, message=REPAIR, cell=KEY, attempt=1)) + "\n")
    with open(attempt / "events.jsonl", "w") as out:
        out.writelines(json.dumps(e) + "\n" for e in events if "campaign" not in e)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 6)
        async with app.run_test(size=(160, 50)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            text = await until(pilot, lambda: TUNE[:40] in screen_text(app)
                               and screen_text(app), what="the executor's warning")
            assert f"warning: {TUNE[:60]}" in text  # the running cell's job pane
            assert "D_ens ray pass 1: warning: runs/master_groups.csv" in text  # recent
            # notified too: the repair is not lost in the scrolling lines
            assert any(REPAIR in n.message for n in app._notifications)
            await pilot.press("q")

    asyncio.run(scenario())
