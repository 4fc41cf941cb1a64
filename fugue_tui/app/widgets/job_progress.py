"""The selected cell's line (label, attempt, elapsed, state, phase, what the watchdog saw)
and one row per job: epoch/step, a bar, loss, val acc, samples/s, elapsed, ETA.

Rendering is :class:`fugue_tui.live.LiveView`'s, the same as ``--batch``'s live view; the
widget redraws only when what it shows changed (to the second).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from engine.state import CellState
from fugue_tui.live import LiveView


def job_signature(view: LiveView, cell: CellState | None, now: float) -> Any:
    """What the job pane depends on: changes when any number it shows could change."""
    if cell is None:
        return None
    jobs = tuple((j.job_id, j.status, j.epoch, j.step, j.loss, j.val_acc, j.train_sps)
                 for j in cell.jobs.values())
    active = cell.state in ("running", "suspect", "hung")
    return (cell.key, cell.state, cell.attempt, cell.phase, cell.watchdog, jobs,
            tuple(cell.planned_jobs), int(now) if active else None)


class JobProgress(Static):
    """Per-job progress of one cell."""

    def __init__(self, **kwargs) -> None:
        super().__init__("no cell selected", **kwargs)
        self._signature: Any = object()

    def show(self, view: LiveView, cell: CellState | None, now: float) -> bool:
        """Redraw for ``cell`` if anything shown changed; True when it redrew."""
        signature = job_signature(view, cell, now)
        if signature == self._signature:
            return False
        self._signature = signature
        if cell is None:
            self.update(Text("no cell selected", style="dim"))
            return True
        parts: list[Any] = [view._cell_line(cell, now)]  # noqa: SLF001 (shared renderer)
        if cell.planned_jobs or cell.jobs:
            parts.append(view._jobs(cell, now))  # noqa: SLF001
        elif cell.state == "queued":
            parts.append(Text("  queued: jobs appear when the cell starts", style="dim"))
        elif cell.error:
            parts.append(Text(f"  {cell.error}", style="dim"))
        for warning in cell.warnings:
            parts.append(Text(f"  warning: {warning}", style="yellow"))
        self.update(Group(*parts))
        return True
