"""The control commands (:mod:`engine.runner.control`) applied to the campaign's cells.
Torch-free.

A command for the running cell stops it (``kill``, ``skip``: for good; ``retry``: to run
it again now, outside the campaign's retries); ``abort`` stops it and ends the campaign; a
command for a queued cell applies at once (``skip``), one for a finished cell queues it
again (``retry``); anything else is said to be not applicable. Each is answered by a
``control`` event saying whether it applied.

With one lane the running attempt reads the inbox itself between its polls
(:meth:`Commands.stop_for`). With several lanes (several devices, a cluster) one thread
reads it (:meth:`Commands.route`, from :mod:`engine.runner.concurrent`) and keeps a stop
for the cell it names on the :class:`~engine.runner.board.Board`, which that cell's
attempt takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from engine.define.matrix import CellSpec
from engine.event_base import ABSENT
from engine.event_types import RunnerControl, RunnerQueued
from engine.runner.attempt import Aborted
from engine.runner.board import Board
from engine.runner.journal import Journal
from engine.runner.outcome import CellOutcome

#: A command for the running cell → (what next, the killed row's reason).
STOPS = {"kill": ("stop", "killed by control command"),
         "skip": ("stop", "skipped by control command"),
         "retry": ("retry", "stopped for a retry by control command")}


class CommandSource(Protocol):
    """Where commands come from (:class:`engine.runner.control.Inbox`)."""

    def poll(self) -> list[dict[str, Any]]: ...


class Commands:
    """The campaign's control commands (see the module docstring).

    ``inbox``: the commands sent since the runner started; ``journal``: the ``control``
    events; ``board``: the cells; ``find(ref)``: a cell by key, key prefix or index (None:
    none or ambiguous); ``skip(cell, reason)``: record a queued cell as skipped (its row
    and event) and return its outcome; ``lanes``: whether several cells run at once.
    """

    def __init__(self, inbox: CommandSource, journal: Journal, board: Board,
                 find: Callable[[str], CellSpec | None],
                 skip: Callable[[CellSpec, str], CellOutcome], lanes: bool):
        self.inbox, self.journal, self.board = inbox, journal, board
        self.find, self.skip, self.lanes = find, skip, lanes

    def poll(self) -> list[dict[str, Any]]:
        """The commands that arrived since the last poll, oldest first."""
        return self.inbox.poll()

    def between_cells(self) -> None:
        """Apply the commands while no cell runs (one lane).

        Raises:
            Aborted: an abort command.
        """
        self._apply(None)

    def stop_for(self, cell: CellSpec) -> tuple[str, str] | None:
        """The stop asked for the running ``cell``: ``(what next, reason)`` with what next
        ``"stop"`` (kill or skip), ``"retry"`` or ``"abort"``; None: it goes on. With one
        lane the other commands apply meanwhile; with several the stop kept for it."""
        if self.lanes:
            with self.board.lock:
                return self.board.stops.pop(cell.key, None)
        return self._apply(cell)

    def _apply(self, running: CellSpec | None) -> tuple[str, str] | None:
        stop = None
        for command in self.poll():
            name, ref = command["cmd"], str(command.get("cell") or "")
            if name == "abort":
                self._answer(cmd=name, applied=True)
                if running is None:
                    raise Aborted()
                stop = ("abort", _abort_reason(command))
                continue
            cell = self.find(ref)
            if cell is not None and running is not None and cell.key == running.key:
                if self.stale_retry(command, cell):
                    continue
                self._answer(cmd=name, cell=cell.key, applied=True)
                stop = STOPS[name]
            else:
                self.queued(name, ref, cell)
        return stop

    def route(self, command: dict[str, Any]) -> str | None:
        """Apply one command while several cells run (under :attr:`Board.lock`): a stop kept
        for the running cell it names, the one-lane handling for the others. Returns the
        reason to stop every running cell with (an abort), else None."""
        name, ref = command["cmd"], str(command.get("cell") or "")
        if name == "abort":
            self._answer(cmd=name, applied=True)
            return _abort_reason(command)
        cell = self.find(ref)
        if cell is not None and cell.key in self.board.running:
            if self.stale_retry(command, cell):
                return None
            self._answer(cmd=name, cell=cell.key, applied=True)
            self.board.stops[cell.key] = STOPS[name]
            return None
        # Unknown, queued or finished cells: exactly the one-lane handling.
        self.queued(name, ref, cell)
        return None

    def stale_retry(self, command: dict[str, Any], cell: CellSpec) -> bool:
        """A retry of the running ``cell`` sent before its attempt started (it was queued
        then): not applied, and said so. Retrying a cell that has not run would only kill
        its first attempt and record a pointless killed row."""
        started = self.board.started_wall.get(cell.key)
        if command["cmd"] != "retry" or started is None or command.get("ts", started) >= started:
            return False
        self._answer(cmd="retry", cell=cell.key, applied=False,
                     reason="the cell had not started when the retry was sent (it runs now)")
        return True

    def queued(self, name: str, ref: str, cell: CellSpec | None) -> None:
        """A command for a cell that is not running: skip a queued one, queue a finished one
        again for a retry; anything else is said to be not applicable."""
        board = self.board
        if cell is None:
            self._answer(cmd=name, cell=ref, applied=False,
                         reason="no such cell (or an ambiguous key prefix)")
        elif name == "skip" and cell in board.queue:
            board.queue.remove(cell)
            board.outcomes[cell.key] = self.skip(cell, "skipped by control command")
            self._answer(cmd=name, cell=cell.key, applied=True)
        elif name == "retry" and cell not in board.queue and cell.key not in board.running:
            board.queue.appendleft(cell)
            board.outcomes.pop(cell.key, None)
            self.journal.emit(RunnerQueued(cell=cell.key, index=cell.index, label=cell.label,
                                           manual_retry=True))
            self._answer(cmd=name, cell=cell.key, applied=True)
        else:
            self._answer(cmd=name, cell=cell.key, applied=False,
                         reason="not applicable to the cell's current state")


    def _answer(self, cmd: str, applied: bool, cell: str | None = None,
                reason: str | None = None) -> None:
        """The ``control`` event answering a command: applied or not (with why; ``cell``
        and ``reason`` left out when None)."""
        self.journal.emit(RunnerControl(
            cmd=cmd, cell=ABSENT if cell is None else cell, applied=applied,
            reason=ABSENT if reason is None else reason))


def _abort_reason(command: dict[str, Any]) -> str:
    """The running cells' killed reason for an abort (the sender's reason, when it gave one)."""
    why = str(command.get("reason") or "").strip()
    return (f"campaign aborted by control command ({why})" if why
            else "campaign aborted by control command")
