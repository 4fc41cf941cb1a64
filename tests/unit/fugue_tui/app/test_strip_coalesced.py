"""The "speedup so far" strip's analysis runs at most once per window (issue 47, item 2:
about 30 ms of pandas per cell end was the dashboard's largest fixed cost): cell ends
closer together are folded into the next analysis, which reads every row arrived by then."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.app import App, ComposeResult

from fugue_tui.app.models.so_far import Coalesce
from fugue_tui.app.widgets.run_header import RunHeader
from tests.app_screen import until


def test_requests_within_a_window_are_folded_into_one():
    now = [100.0]
    gate = Coalesce(window=3.0, clock=lambda: now[0])
    assert gate.ask() == 0.0  # the first cell end: at once
    gate.start()
    now[0] = 101.0
    assert gate.ask() == 2.0  # within the window: at its end
    now[0] = 102.0
    assert gate.ask() is None  # folded into the pending one
    now[0] = 103.0
    gate.start()
    now[0] = 110.0
    assert gate.ask() == 0.0  # a quiet spell: at once again


def test_the_header_runs_one_analysis_for_cell_ends_in_one_window():
    """Three cell ends: the first analysed at once, the next two folded into one analysis
    at the window's end — two analyses, not three; the last for the newest arguments."""
    calls: list[tuple[Path, str]] = []

    class Host(App):
        def compose(self) -> ComposeResult:
            yield RunHeader()

    async def scenario():
        app = Host()
        async with app.run_test() as pilot:
            header = app.query_one(RunHeader)
            header._so_far_gate = Coalesce(window=0.3)
            header._speedup_so_far = lambda *a: calls.append(a)  # the worker, counted
            header._ask_so_far(Path("runs"), "c1")
            header._ask_so_far(Path("runs"), "c2")
            header._ask_so_far(Path("runs"), "c3")
            assert calls == [(Path("runs"), "c1")]
            await until(pilot, lambda: len(calls) == 2, timeout=10, what="the folded analysis")
            assert calls[1] == (Path("runs"), "c3")
            assert header.so_far_runs == 2
            await asyncio.sleep(0.4)
            assert len(calls) == 2  # nothing else pending

    asyncio.run(scenario())
