"""The cell table keeps no stale render caches (issue 47, item 2: DataTable keyed them by
an update count, so each clock tick of the running cell's elapsed time left a row's worth
behind, up to 10 000 cells and 1 000 lines: a heap the garbage collector walked again and
again, growing with the campaign)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from engine.observe.state import CampaignState
from fugue_tui.app.widgets.cell_table import CellTable


def _state(cells: int) -> CampaignState:
    state = CampaignState()
    state.apply({"type": "campaign_started", "ts": 0.0, "campaign": "c", "device": "cpu",
                 "cells": cells, "runner_pid": 5})
    for i in range(cells):
        state.apply({"type": "queued", "ts": 0.0, "campaign": "c", "cell": f"k{i}",
                     "index": i + 1, "label": f"D_ens seq pass {i + 1}"})
    state.apply({"type": "cell_started", "ts": 1.0, "campaign": "c", "cell": "k0", "index": 1,
                 "label": "D_ens seq pass 1", "attempt": 1, "pid": 11, "events": "e",
                 "log_path": "l"})
    return state


class _Host(App):
    def compose(self) -> ComposeResult:
        yield CellTable(id="cells")


def test_clock_ticks_leave_no_stale_render_caches_behind():
    asyncio.run(_scenario())


async def _scenario() -> None:
    app = _Host()
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(CellTable)
        state = _state(40)
        sizes = []
        for second in range(40):  # the running cell's elapsed time, one tick a second
            assert table.sync(state, 2.0 + second) > 0
            shown = f"0:{second + 1:02d}"
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            # wait until the tick's value is painted (the caches filled for this count)
            while not any(shown in table.render_line(y).text for y in range(table.size.height)):
                assert loop.time() < deadline, f"{shown} never painted"
                await pilot.pause(0.02)
            sizes.append(len(table._cell_render_cache) + len(table._line_cache)
                         + len(table._row_render_cache))
        # one paint's worth each time, not one more row's worth per tick
        assert max(sizes[10:]) <= max(sizes[:10]) + 5, sizes
