"""The process view's snapshots at 80x24 and 160x48 (tests/snapshots/processes_*.svg): a
fixed sample (runner, a cell with an mp worker and its monitor, a Ray raylet; GPU memory
measured for the worker only), sorted by CPU % largest first, the unmeasured empty."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
from textual.app import App
from textual.widgets import DataTable

from fugue_tui.app.models.processes import ProcessSampler, ProcRow
from fugue_tui.app.screens.processes import ProcessScreen
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import await_snapshot

KEY = "c" * 16
CELL = "D_ens mp pass 1"
ROWS = [
    ProcRow(4100, 1, "runner", "", "", "python -m engine.runner run campaign.toml", 2.0,
            96.0, None),
    ProcRow(4120, 4100, "cell", CELL, KEY, "python -m engine.cell --attempt-dir "
            "runs/procs/cells/001-D_ens-mp-p1-cccccccc/attempt-1", 12.0, 410.0, None),
    ProcRow(4133, 4120, "worker", CELL, KEY, "python -c from multiprocessing.spawn import "
            "spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)", 97.0, 620.5, 1536.0),
    ProcRow(4131, 4120, "monitor", CELL, KEY, "python -m engine.measure.monitor --root-pid "
            "4120 --interval 0.5", 1.0, 38.0, None),
    ProcRow(4150, 4100, "raylet", "", "", "/ray/core/src/ray/raylet/raylet "
            "--node_manager_port=0", None, 70.0, None),
]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_the_process_view(tmp_path, monkeypatch, size):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(ProcessSampler, "sample", lambda self: list(ROWS))
    run = SimpleNamespace(handle=None, run_dir=Path(tmp_path), runner_alive=False,
                          view=SimpleNamespace(state=SimpleNamespace(campaign="procs",
                                                                     runner_pid=None)),
                          running_cells=list)

    class Host(App):
        CSS_PATH = str(Path(__file__).resolve().parents[4] / "fugue_tui" / "app" / "app.tcss")

        def on_mount(self) -> None:
            self.push_screen(ProcessScreen(run, nvml=False))

    async def scenario():
        app = Host()
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ProcessScreen)
                        and app.screen.query_one(DataTable).row_count == 5
                        and "sorted by CPU % ↓" in screen_text(app), what="the rows")
            assert [r.split()[0] for r in screen_text(app).splitlines()[2:7]] == \
                ["4133", "4120", "4100", "4131", "4150"]  # CPU % ↓, the unmeasured last
            before = None  # until the last paint (the footer's last line came late)
            for _ in range(30):
                await pilot.pause(0.2)
                now = app.export_screenshot()
                if now == before:
                    break
                before = now
            await await_snapshot(pilot, app, f"processes_{size[0]}x{size[1]}", tmp_path)

    asyncio.run(scenario())


def test_the_run_screen_with_its_host_bar_at_80x24(tmp_path, monkeypatch):
    """A live campaign's run screen at 80x24 with the host bar (a fixed host sample with
    two GPUs, one of them without a utilisation reading): one line under the header."""
    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.models import series
    from fugue_tui.app.screens.run import RunScreen
    from fugue_tui.app.widgets.host_bar import HostBar
    from tests.unit.fugue_tui.app.test_host_bar import SAMPLE
    from tests.unit.fugue_tui.app.test_run_layout_small import (
        RUNNING,
        AliveRunner,
        live_copy,
    )

    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(series.HostPoller, "__init__", lambda self, **kw: None)
    monkeypatch.setattr(series.HostPoller, "sample", lambda self: dict(SAMPLE))
    run, cut = live_copy(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: cut + 5)
        async with app.run_test(size=(80, 24)) as pilot:
            app.open_run(run, AliveRunner(), 0, attached=True)
            line = ("host CPU 21% · mem 3.2/16.0 GiB · GPU0 87% 10.2/80.0 GiB · GPU1 "
                    "0.5/80.0 GiB")  # 77 columns: the long form fits
            await until(pilot, lambda: isinstance(app.screen, RunScreen)
                        and app.screen.query(HostBar) and RUNNING.search(screen_text(app))
                        and f" {line}" in screen_text(app).splitlines(), what="the bar")
            # The screen's text, not an SVG snapshot: at 80x24 the jobs pane scrolls and its
            # scrollbar's thumb rested in one of two places depending on timing (the SVG
            # differed in that glyph only). The bar is the line right under the header and
            # nothing above or below it is cut.
            lines = screen_text(app).splitlines()
            at = lines.index(f" {line}")
            assert 1 <= at <= 3, lines[:5]
            assert RUNNING.search("\n".join(lines[at + 1:]))

    asyncio.run(scenario())
