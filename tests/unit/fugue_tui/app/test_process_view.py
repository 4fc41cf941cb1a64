"""The process view (issue 48 item 1): the campaign's process tree with CPU, RSS and GPU
memory (the fake NVML), sorted by the picked column, and a kill by pid that asks first
(naming the pid and its command), is refused for a process not of the campaign's cells, and
goes to the runner as the cell's recorded ``kill`` command carrying the pid."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from textual.app import App
from textual.widgets import DataTable

from engine.runner.board import Board
from engine.runner.commands import Commands
from engine.runner.placement import Slot
from fugue_tui.app.models.processes import ProcRow, kill_target, sort_rows
from fugue_tui.app.screens.modals import ConfirmScreen, PathScreen
from fugue_tui.app.screens.processes import ColumnPicker, ProcessScreen
from tests.app_screen import screen_text, until
from tests.fixtures.fake_nvml import FakeDevice, FakeNVML

KEY = "c" * 16
#: A runner stand-in: a cell process with a worker (sleep), and a process in no cell.
_TREE = """
import subprocess, sys, time
cell = subprocess.Popen([sys.executable, "-c",
    "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"])
other = subprocess.Popen(["sleep", "61"])
print(cell.pid, other.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def tree():
    proc = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    cell, other = map(int, proc.stdout.readline().split())
    deadline = time.monotonic() + 20
    while len(psutil.Process(proc.pid).children(recursive=True)) < 3:
        assert time.monotonic() < deadline, "the stand-in tree did not start"
        time.sleep(0.05)
    yield proc.pid, cell, other
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _run_folder(root: Path) -> Path:
    run = root / "run"
    run.mkdir()
    lines = [{"v": 1, "ts": 1.0, "type": "campaign_started", "campaign": "procs", "cells": 1,
              "device": "cpu", "run_dir": str(run), "runner_pid": 1, "resume": False},
             {"v": 1, "ts": 1.0, "type": "queued", "campaign": "procs", "cell": KEY,
              "index": 1, "label": "D_ens seq pass 1"}]
    (run / "runner.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return run


def _stand_in(run: Path, runner: int, cell: int):
    """What the process view reads of the run screen."""
    return SimpleNamespace(
        handle=SimpleNamespace(pid=runner), run_dir=run, runner_alive=True,
        view=SimpleNamespace(state=SimpleNamespace(campaign="procs", runner_pid=runner)),
        running_cells=lambda: [SimpleNamespace(pid=cell, key=KEY, label="D_ens seq pass 1")])


def _told(app, text: str) -> bool:
    return any(text in n.message for n in app._notifications)  # noqa: SLF001


def _rows(app) -> list[list[str]]:
    table = app.screen.query_one(DataTable)
    return [[str(v) for v in table.get_row_at(i)] for i in range(table.row_count)]


def test_the_view_sorts_measures_and_kills_only_the_campaigns_cells(tmp_path, tree):
    runner, cell, other = tree
    run = _run_folder(tmp_path)
    nvml = FakeNVML([FakeDevice("GPU-0", processes={cell: 512.0})])

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ProcessScreen(_stand_in(run, runner, cell), nvml=nvml))

    async def scenario():
        app = Host()
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ProcessScreen)
                        and app.screen.query_one(DataTable).row_count == 4
                        and "" not in [r[3] for r in _rows(app)], what="4 rows with CPU %")
            rows = {int(r[0]): r for r in _rows(app)}
            assert rows[runner][1] == "runner" and rows[cell][1:3] == ["cell", "D_ens seq pass 1"]
            assert [r[1] for pid, r in rows.items() if pid not in (runner, cell, other)] == \
                ["worker"]
            assert rows[cell][5] == "512" and rows[runner][5] == ""  # not listed: empty
            # o: pick PID (three up from CPU %): largest first; O: reversed
            await pilot.press("o")
            await until(pilot, lambda: isinstance(app.screen, ColumnPicker), what="picker")
            await pilot.press("up", "up", "up", "enter")
            pids = sorted(rows, reverse=True)
            await until(pilot, lambda: [int(r[0]) for r in _rows(app)] == pids, what="PID ↓")
            await pilot.press("O")
            await until(pilot, lambda: [int(r[0]) for r in _rows(app)] == pids[::-1],
                        what="PID ↑")
            screen = app.screen
            control = run / "control"
            # the runner and a process in no cell: refused in one line, nothing sent
            table = screen.query_one(DataTable)
            table.move_cursor(row=table.get_row_index(str(runner)))
            await pilot.press("x")
            await until(pilot, lambda: _told(app, f"pid {runner} is the campaign's runner"),
                        what="the runner refused")
            table.move_cursor(row=table.get_row_index(str(other)))
            await pilot.press("x")
            await until(pilot, lambda: _told(app, f"pid {other} (sleep) belongs to no cell"),
                        what="a process in no cell refused")
            # K: a typed pid that is not the campaign's
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, PathScreen), what="pid prompt")
            await pilot.press(*str(os.getpid()), "enter")
            await until(pilot, lambda: _told(app, f"pid {os.getpid()} is not a process of "
                        "this campaign: not killed"), what="a stranger refused")
            assert not control.exists()
            # the cell's process: asked (pid and command named); n cancels, y sends
            table.move_cursor(row=table.get_row_index(str(cell)))
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
            assert f"Kill pid {cell} (the cell's process)?" in screen_text(app)
            assert "import subprocess, time" in screen_text(app)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, ProcessScreen), what="cancel")
            assert not control.exists()
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
            await pilot.press("y")
            await until(pilot, lambda: control.exists() and list(control.glob("*.json")),
                        what="the command file")
            [sent] = [json.loads(p.read_text()) for p in control.glob("*.json")]
            assert (sent["cmd"], sent["cell"], sent["pid"]) == ("kill", KEY, cell)
            assert "import subprocess" in sent["process"]
            assert screen.samples >= 1 and screen.sample_cpu_s > 0
            await pilot.press("escape")

    asyncio.run(scenario())


def test_the_runner_records_who_killed_what():
    """A kill carrying a pid: applied, its control event and the killed row's reason name
    the pid, its command and the sender."""
    cell = SimpleNamespace(key="k1", index=1, label="D_ens seq")
    emitted: list = []
    board = Board(threading.RLock(), running={"k1": Slot(0, {"uuid": "GPU-0"})},
                  started_wall={"k1": time.time() - 60})
    journal = SimpleNamespace(emit=lambda event: emitted.append(dict(event.fields)))
    commands = Commands(SimpleNamespace(poll=list), journal, board,
                        find=lambda ref: cell if ref == "k1" else None, skip=None, lanes=True)
    commands.route({"cmd": "kill", "cell": "k1", "pid": 4242, "process": "python -m x",
                    "sender_pid": 7})
    who = "pid 4242 (python -m x), sent by pid 7"
    assert emitted == [{"cmd": "kill", "cell": "k1", "applied": True, "reason": who}]
    assert board.stops["k1"] == ("stop", f"killed by control command: {who}")
    commands.route({"cmd": "kill", "cell": "k1"})  # a plain kill: as before
    assert emitted[-1]["applied"] is False


def test_sorting_puts_the_unmeasured_last_both_ways_and_kill_targets():
    def row(pid, gpu, role="worker", key=KEY):
        return ProcRow(pid, 1, role, "c", key, "cmd", None, 1.0, gpu)

    rows = [row(5, None), row(3, 10.0), row(4, 30.0), row(2, None)]
    assert [r.pid for r in sort_rows(rows, "gpu_mib")] == [3, 4, 2, 5]
    assert [r.pid for r in sort_rows(rows, "gpu_mib", True)] == [4, 3, 2, 5]
    assert kill_target(3, rows).cell_key == KEY
    assert "not a process of this campaign" in kill_target(99, rows).refusal
    assert "belongs to no cell" in kill_target(1, [row(1, None, "raylet", "")]).refusal
