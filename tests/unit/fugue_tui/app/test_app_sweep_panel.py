"""The Results screen's K-sweep and advice panel (issue 23): drawn for rows that form a
sweep (the knee marked) and, for any rows, the advice — the same text as
``fugue-tui report --advise``."""

from __future__ import annotations

import asyncio

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.results import ResultsScreen
from fugue_tui.app.widgets.sweep_panel import SweepPanel
from tests.app_screen import until
from tests.snapshots.helpers import SIZE
from tests.unit.engine.results.test_knee import TP, _sweep


def test_panel_draws_the_sweep_and_the_advice(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    _sweep(tmp_path / "runs", seq={1: 100, 2: 101, 4: 100, 8: 99}, unified_model=dict(TP))

    async def scenario():
        app = FugueApp(results=str(tmp_path / "runs"))
        async with app.run_test(size=SIZE) as pilot:
            panel = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                and app.screen.query_one(SweepPanel).draws
                                and app.screen.query_one(SweepPanel), timeout=60,
                                what="the sweep panel")
            assert panel.display
            text = panel.text
            assert "K sweep: training throughput vs K" in text
            assert "◆ knee" in text and "unified_model: knee K=4" in text
            assert "recommended: unified_model, K = 4 models at once (the knee)" in text
            # the panel follows the filter: seq's rows alone
            app.screen.set_filter("exec:seq")
            await until(pilot, lambda: "unified_model" not in panel.text and panel.text,
                        timeout=60, what="the filtered panel")
            assert "seq: knee K=1" in panel.text and "recommended: seq, K = 1" in panel.text

    asyncio.run(scenario())


def test_panel_draws_each_streams_advice(tmp_path, monkeypatch):
    """Stream rows (issue 52): no K sweep and no batch advice, but the panel shows each
    stream's lowest p95 job completion time, the runner-up and the verdict, as
    ``report --advise`` prints them (the recorded stream: seq and mp, one pass each)."""
    from tests.unit.fugue_tui.report.test_report_stream_advice import STREAM_RUNS

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(results=str(STREAM_RUNS))
        async with app.run_test(size=SIZE) as pilot:
            panel = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                and app.screen.query_one(SweepPanel).draws
                                and app.screen.query_one(SweepPanel), timeout=60,
                                what="the advice panel")
            assert panel.display
            text = panel.text
            assert "K sweep" not in text and "no advice" not in text
            assert "advice (as fugue-tui report --advise)" in text
            assert "lowest p95 job completion time: seq" in text
            assert "runner-up: mp" in text and "run 4 more" in text
            assert "offered load" in text

    asyncio.run(scenario())
