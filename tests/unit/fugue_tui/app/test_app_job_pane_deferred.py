"""The job pane's redraw rate limit never loses the last numbers: a change held back
(the same cell's progress within :data:`MIN_REDRAW_S` of the last draw) is marked deferred,
the run screen stays dirty, and the next show draws it. Regression: a forked cell whose last
``job_progress`` arrived within a second of its previous draw left the pane showing the
older loss after the campaign went quiet (CI, session 5)."""

from __future__ import annotations

import asyncio
import time

from textual.app import App

from engine.observe.state import CellState, JobState
from fugue_tui.app.widgets import job_progress as jp
from fugue_tui.live.view import LiveView


class PaneApp(App):
    def compose(self):
        yield jp.JobProgress(id="jobs")


def cell(loss: float, state: str = "done") -> CellState:
    c = CellState(key="k" * 16, index=1, label="D_ens seq pass 1", state=state, attempt=1)
    c.jobs["D_ens_ens_s0"] = JobState("D_ens_ens_s0", status="ok", epoch=1, epochs=1, step=9,
                                      steps=9, loss=loss, val_acc=0.9)
    return c


def test_a_held_back_change_is_deferred_then_drawn():
    view = LiveView(1, clock=lambda: 5.0)

    async def scenario():
        app = PaneApp()
        async with app.run_test(size=(120, 20)) as pilot:
            pane = app.query_one(jp.JobProgress)
            await pilot.pause()  # laid out (a resize forces the next draw)
            assert pane.show(view, cell(0.5), 5.0) and not pane.deferred
            await pilot.pause()
            pane.show(view, cell(0.5), 5.0)  # again if the first draw's layout resized it
            await pilot.pause()
            assert "0.5000" in str(pane.render())
            # the last progress just after (the last draw is set ahead, so a loaded machine
            # cannot let the rate-limit slot pass meanwhile): held back, and said so
            pane._last_draw = time.monotonic() + 100
            assert not pane.show(view, cell(0.25), 5.0)
            assert pane.deferred
            assert "0.2500" not in str(pane.render())
            # asked again after the rate limit: drawn, no longer deferred
            pane._last_draw = time.monotonic() - jp.MIN_REDRAW_S
            assert pane.show(view, cell(0.25), 5.0) and not pane.deferred
            await pilot.pause()
            assert "0.2500" in str(pane.render())
            # nothing new: no draw and nothing pending
            assert not pane.show(view, cell(0.25), 5.0) and not pane.deferred

    asyncio.run(scenario())
