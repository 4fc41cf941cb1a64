"""The run screen's navigation keys (issue 48 item 2), a mixin of
:class:`~fugue_tui.app.screens.run.RunScreen`: jump to a pane (``1``-``4``), open the
selected cell's log or events file in ``$PAGER`` or ``$EDITOR`` and come back
(:mod:`fugue_tui.app.external`), copy its key or folder to the clipboard; and, through its
base :class:`~fugue_tui.app.screens.run_search.RunSearch`, the ``/`` search (one mixin, so
that the hub names one).
The copy is :func:`fugue_tui.app.clipboard.copy_shown`'s (OSC 52, and the text shown).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fugue_tui.app.clipboard import copy_shown
from fugue_tui.app.external import open_in
from fugue_tui.app.screens.run_layout import zoom_to, zoomed
from fugue_tui.app.screens.run_search import RunSearch

if TYPE_CHECKING:
    from engine.observe.state import CellState

#: The pane each jump key gives the keys to.
JUMPS = {"cells": "#cells", "jobs": "#jobs-pane", "log": "#log", "events": "#recent"}


def cell_file(cell: CellState | None, kind: str) -> Path | None:
    """The selected cell's ``log`` (``cell.log``) or ``events`` (``events.jsonl``) file of
    its latest attempt; None before its first attempt (no cell, or none started)."""
    if cell is None or not cell.log_path:
        return None
    log = Path(cell.log_path)
    return log if kind == "log" else log.parent / "events.jsonl"


def copied_text(cell: CellState, what: str, run_dir: Path) -> str:
    """What ``y`` (``key``) and ``Y`` (``path``) copy: the cell's key, or the folder of
    its latest attempt (its cell.log and events.jsonl; the run folder before one)."""
    if what == "key":
        return cell.key
    return str(Path(cell.log_path).parent if cell.log_path else run_dir)


class RunNavigation(RunSearch):
    """Jump, open and copy actions, and the search's (mixed into the run screen)."""

    if TYPE_CHECKING:
        run_dir: Path
        dirty: bool

        def selected_cell(self) -> CellState | None: ...

    def action_jump(self, pane: str) -> None:
        """Give the keys to ``pane`` (:data:`JUMPS`); a zoom to another pane is left for
        every pane (the one jumped to must show)."""
        if zoomed(self) not in ("", pane):
            zoom_to(self, "")
        self.query_one(JUMPS[pane]).focus()

    def action_open_file(self, kind: str, role: str) -> None:
        """The selected cell's ``kind`` file (``log``, ``events``) in ``role``'s program
        (``PAGER``, ``EDITOR``); one line says why not, or what went wrong."""
        cell = self.selected_cell()
        path = cell_file(cell, kind)
        if path is None:
            self.notify("no file yet: the selected cell has not started", markup=False)
            return
        if not path.is_file():
            self.notify(f"{path}: no such file (yet)", severity="warning", markup=False)
            return
        problem = open_in(self.app, role, path)
        if problem is not None:
            self.notify(problem, severity="error", markup=False)
        self.dirty = True  # back: redraw every pane at the next tick

    def action_copy(self, what: str) -> None:
        """Copy the selected cell's key (``key``) or attempt folder (``path``), and show
        it (see the module docstring)."""
        cell = self.selected_cell()
        if cell is None:
            self.notify("no cell selected: nothing to copy", markup=False)
            return
        copy_shown(self, copied_text(cell, what, self.run_dir),
                   "cell key" if what == "key" else "cell folder")
