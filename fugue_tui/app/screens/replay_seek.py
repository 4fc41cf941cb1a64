"""Seek a replay backwards, forwards or to a time (``[``, ``]``, ``T``: :data:`fugue_tui.app.actions.REPLAY`).

A seek rebuilds the run screen's state from the start: a fresh
:class:`~fugue_tui.app.models.run.RunModel` folds every event up to the target through the
one reducer (engine.observe, as live), so the screen after a seek back reads exactly as if
played to that time — no undo to get wrong. The cell table is emptied and refilled (rows of
retries not yet made must go). News the follow worker posted before the seek carries the
old generation and is dropped (:meth:`fugue_tui.app.models.replay.Replay.due_tagged`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from fugue_tui.app.models.replay import parse_time


def seek(screen: Any, target: float) -> None:
    """Move ``screen``'s replay to campaign time ``target`` (Unix s) and redraw at once."""
    from fugue_tui.app.models.run import RunModel
    from fugue_tui.app.widgets.cell_table import CellTable

    _, events = screen.replay.seek(target)
    model = RunModel(screen.clock, False)
    model.apply(events)  # warnings were notified when first played: not again
    screen.model = model
    table = screen.query_one(CellTable)
    table.clear()
    table._shown.clear()  # noqa: SLF001 - the table's own mirror of its rows, emptied with them
    screen.dirty = True
    screen.refresh_view()


def seek_by(screen: Any, direction: int) -> None:
    """``[`` (``direction`` -1) / ``]`` (+1): one :meth:`Replay.seek_step` from now."""
    replay = screen.replay
    seek(screen, replay.clock() + direction * replay.seek_step())


def ask_time(screen: Any) -> None:
    """``T``: the time prompt; an answer seeks, Escape leaves the replay as it was."""
    replay = screen.replay

    def done(seconds: float | None) -> None:
        if seconds is not None:
            seek(screen, replay.start_ts + seconds)

    screen.app.push_screen(SeekScreen(replay.end_ts - replay.start_ts), done)


class SeekScreen(ModalScreen[float | None]):
    """Ask for a campaign time from the start (``m:ss``, ``h:mm:ss`` or seconds); Enter
    seeks, Escape cancels. A bad value leaves one line under the box and the dialog open."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="seek.cancel")]

    def __init__(self, length_s: float) -> None:
        super().__init__()
        self.length_s = length_s

    def compose(self) -> ComposeResult:
        from fugue_tui.format import fmt_duration

        with Vertical(id="dialog"):
            yield Label(f"Seek to (m:ss or seconds from the start; the campaign lasts "
                        f"{fmt_duration(self.length_s)}):", id="question")
            yield Input("", id="seek-time", placeholder="e.g. 1:30")
            hint = Label("", id="seek-hint")
            hint.display = False
            yield hint

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            seconds = parse_time(event.value)
        except ValueError as exc:
            hint = self.query_one("#seek-hint", Label)
            hint.display = True
            hint.update(Text(str(exc), style="bold yellow"))
            return
        self.dismiss(seconds)

    def action_cancel(self) -> None:
        self.dismiss(None)
