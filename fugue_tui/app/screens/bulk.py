"""The run screen's commands on sets of cells: ``F`` filters the table
(:mod:`fugue_tui.app.screens.run_filter`), ``R`` retries every failed cell, ``K`` skips every queued
cell of an experiment (the selected cell's, else one picked from a list). Each asks once,
naming the count, then sends the same control commands the single-cell ``r`` and ``s``
send (:func:`engine.runner.control.send`, one recorded command file per cell: the control
protocol has no bulk command). From the user's view it is one act: one question, one
thread worker that sends them all in campaign order, one notice with the outcome ("sent
retry for 3 cells", or which were not sent and why).

Which cells qualify is :func:`targets`' rule (Textual-free): the campaign's cells, not only
those a filter shows; the question says how many of them the filter hides."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from engine.observe.state import CellState
from fugue_tui.app.messages import Notice
from fugue_tui.app.models.cell_filter import CellFilter, cell_fields
from fugue_tui.app.screens.modals import ConfirmScreen
from fugue_tui.app.screens.run_filter import ChoicePicker, pick_filter

if TYPE_CHECKING:
    from fugue_tui.app.screens.run import RunScreen

#: The cells a bulk command takes: the state they must be in, per command.
BULK_STATE = {"retry": "failed", "skip": "queued"}
#: Labels named in a question (then "and N more").
NAMED = 4


def targets(command: str, cells: Iterable[CellState], experiment: str = "") -> list[CellState]:
    """The cells ``command`` (retry: the failed ones; skip: the queued ones, of
    ``experiment`` when given) goes to, in campaign order."""
    want = BULK_STATE[command]
    return sorted((c for c in cells if c.state == want and (
        not experiment or cell_fields(c)["experiment"] == experiment)), key=lambda c: c.index)


def question(command: str, cells: list[CellState], experiment: str = "",
             shown: CellFilter | None = None) -> str:
    """``"Retry 3 failed cells? …"``: the count, what happens, the first labels, and how
    many of them the filter ``shown`` hides."""
    n = len(cells)
    plural = "s" if n != 1 else ""
    names = ", ".join(f"{c.index} {c.label}" for c in cells[:NAMED])
    more = f" and {n - NAMED} more" if n > NAMED else ""
    hidden = sum(1 for c in cells if shown is not None and not shown.keeps(c))
    hidden_note = f" {hidden} of them hidden by the filter." if hidden else ""
    if command == "retry":
        head = f"Retry {n} failed cell{plural}? Each runs again"
    else:
        head = f"Skip {n} queued cell{plural} of {experiment}? They will not run"
    return (f"{head} (one control {command} per cell, as '{command[0]}' sends): "
            f"{names}{more}.{hidden_note}")


class BulkCommands:
    """The bulk commands of one run screen (see the module)."""

    def __init__(self, screen: RunScreen) -> None:
        self.screen = screen

    def _live(self, what: str) -> bool:
        """A live runner that is not stopping; else say why nothing happens."""
        screen = self.screen
        if screen.runner_alive and not screen.stopping and screen.replay is None:
            return True
        screen.notify(f"{what}: no live runner to send it to", severity="warning",
                      timeout=4, markup=False)
        return False

    def filter(self) -> None:
        """``F``: the filter picker (:func:`~fugue_tui.app.screens.run_filter.pick_filter`)."""
        pick_filter(self.screen)

    def retry_failed(self) -> None:
        """``R``: ask, then retry every failed cell."""
        if not self._live("retry failed"):
            return
        cells = targets("retry", self.screen.view.state.cells.values())
        if not cells:
            self.screen.notify("retry failed: no failed cell", timeout=4, markup=False)
            return
        self._confirm("retry", cells)

    def skip_queued(self) -> None:
        """``K``: ask, then skip every queued cell of the selected cell's experiment; when
        it has none queued, pick the experiment from those that have."""
        screen = self.screen
        if not self._live("skip queued"):
            return
        all_cells = screen.view.state.cells.values()
        cell = screen.selected_cell()
        experiment = cell_fields(cell)["experiment"] if cell is not None else ""
        if experiment and targets("skip", all_cells, experiment):
            self._confirm("skip", targets("skip", all_cells, experiment), experiment)
            return
        counts: dict[str, int] = {}
        for c in targets("skip", all_cells):
            exp = cell_fields(c)["experiment"]
            counts[exp] = counts.get(exp, 0) + 1
        if not counts:
            screen.notify("skip queued: no queued cell", timeout=4, markup=False)
            return

        def picked(exp: str | None) -> None:
            if exp:
                self._confirm("skip", targets("skip", screen.view.state.cells.values(), exp),
                              exp)
        why = f"{experiment} has no queued cell; s" if experiment else "S"
        screen.app.push_screen(ChoicePicker(
            f"{why}kip the queued cells of which experiment? (Enter; esc cancels)",
            [(exp, f"{exp}  ({n} queued)") for exp, n in counts.items()]), picked)

    def _confirm(self, command: str, cells: list[CellState], experiment: str = "") -> None:
        screen = self.screen
        keys = [c.key for c in cells]

        def answer(yes: bool | None) -> None:
            if yes:
                screen.run_worker(partial(self._send, command, keys), thread=True,
                                  group="control")
        screen.app.push_screen(ConfirmScreen(
            question(command, cells, experiment, screen.cell_filter),
            yes=f"{command.capitalize()} {len(cells)}"), answer)

    def _send(self, command: str, keys: list[str]) -> None:
        """(thread worker) One control command per cell, in order; one notice says how
        many went, and which did not and why."""
        from engine.errors import FugueError
        from engine.runner.control import send

        failed: list[str] = []
        for key in keys:
            try:
                send(self.screen.run_dir, command, key)
            except FugueError as exc:
                failed.append(f"{key[:8]}: {exc}")
        sent = len(keys) - len(failed)
        if failed:
            self.screen.post_message(Notice(
                f"sent {command} for {sent} of {len(keys)} cells; not sent: "
                + "; ".join(failed), "error"))
        else:
            self.screen.post_message(Notice(f"sent {command} for {sent} cells"))
