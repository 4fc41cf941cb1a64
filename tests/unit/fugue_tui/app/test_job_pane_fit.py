"""The job pane fits its columns to the values shown, not only to the cell, width and job
count (issue 47, item 10: a hpo cell's jobs, chosen while they waited with "–" everywhere,
kept every column once numbers came; the table, too wide, cut loss and ETA to "…" at
160x48 with the pane's room unused)."""

from __future__ import annotations

import asyncio

from textual.app import App

from engine.observe.state import CellState, JobState
from fugue_tui.app.widgets.job_progress import JobProgress
from fugue_tui.live.view import LiveView

JOBS = [f"D_hpo_t{i}" for i in range(6)]


class PaneApp(App):
    def compose(self):
        yield JobProgress(id="jobs")


def hpo_cell(progress: bool) -> CellState:
    cell = CellState(key="h" * 16, index=12, label="D_hpo ray fifo pass 1", state="running",
                     attempt=1, started_ts=100.0)
    cell.planned_jobs = list(JOBS)
    if progress:
        for i, job in enumerate(JOBS):
            cell.jobs[job] = JobState(job, status="running", epoch=3, epochs=20, step=40,
                                      steps=120, loss=0.3545 + i / 100, val_acc=0.4431,
                                      train_sps=26_627.0, elapsed=12.0)
        cell.warnings.append("host load average 8.9 on 2 cores: the machine was busy; "
                             "busiest other processes: python (pid 4242) 95 %, "
                             "chromium-browser (pid 4444) 33 %")
    return cell


def test_columns_chosen_again_when_the_values_widen():
    view = LiveView(20, clock=lambda: 130.0)

    async def scenario():
        app = PaneApp()
        # the job pane's width at 160x48 (3fr of the 160 columns, less its borders)
        async with app.run_test(size=(94, 20)) as pilot:
            pane = app.query_one(JobProgress)
            await pilot.pause()
            pane.show(view, hpo_cell(False), 130.0)
            await pilot.pause()
            assert "samples/s" in pane.render().plain  # the waiting jobs: every column
            pane._last_draw = float("-inf")  # the rate limit is not what this is about
            pane.show(view, hpo_cell(True), 130.0)
            await pilot.pause()
            lines = pane.render().plain.split("\n")
            assert lines[1].split() == ["job", "epoch", "progress", "loss", "val", "acc",
                                        "samples/s", "elapsed", "ETA"], lines[1]
            assert lines[2].split()[0] == "D_hpo_t0" and "0.3545" in lines[2], lines[2]
            assert "…" not in "\n".join(lines[:-1]), lines
            # the warning in one row, cut at the pane's edge (it wrapped: a job row less)
            assert len(lines) == 2 + len(JOBS) + 1, lines
            assert lines[-1].startswith("  warning: host load") and lines[-1].endswith("…")

    asyncio.run(scenario())


def test_columns_chosen_once_for_cells_of_the_same_shape():
    """A campaign's next cell with the same width, jobs and values' widths reuses the
    columns chosen for the previous one: no table measured again (issue 47, item 2: up to
    five measurements at each cell end, every ~2 s in the long bench)."""
    view = LiveView(20, clock=lambda: 130.0)

    def cell(key: str, index: int) -> CellState:
        one = hpo_cell(True)
        one.key, one.index = key * 16, index
        return one

    async def scenario():
        app = PaneApp()
        async with app.run_test(size=(94, 20)) as pilot:
            pane = app.query_one(JobProgress)
            await pilot.pause()
            pane.show(view, cell("a", 1), 130.0)
            assert pane.fits == 1
            first = pane.render().plain.split("\n")[1]
            pane.show(view, cell("b", 2), 130.0)  # another cell: not rate-limited
            assert "D_hpo_t0" in pane.render().plain
            assert pane.render().plain.split("\n")[1] == first  # the same columns
            assert pane.fits == 1  # ... chosen once
            await pilot.resize_terminal(70, 20)
            await pilot.pause()
            pane.show(view, cell("c", 3), 130.0)
            assert pane.fits == 2  # a new width: chosen again

    asyncio.run(scenario())


def test_new_numbers_that_read_the_same_are_not_repainted():
    """A job's rate moved in a digit the pane does not show: no update, no repaint."""
    view = LiveView(20, clock=lambda: 130.0)

    async def scenario():
        app = PaneApp()
        async with app.run_test(size=(94, 20)) as pilot:
            pane = app.query_one(JobProgress)
            await pilot.pause()
            cell = hpo_cell(True)
            cell.state = "done"  # no clock ticking in it
            pane.show(view, cell, 130.0)
            draws = pane.draws
            cell.jobs[JOBS[0]].train_sps = 26_627.01
            pane._last_draw = float("-inf")  # the rate limit is not what this is about
            assert pane.show(view, cell, 130.0)  # a change it looked at ...
            assert pane.draws == draws  # ... that reads the same: not drawn again
            cell.jobs[JOBS[0]].loss = 0.1234
            pane._last_draw = float("-inf")
            pane.show(view, cell, 130.0)
            assert pane.draws == draws + 1 and "0.1234" in pane.render().plain

    asyncio.run(scenario())
