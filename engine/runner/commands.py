"""The control commands (:mod:`engine.runner.control`) applied to the campaign's cells.
Torch-free.

A command for the running cell stops it (``kill``, ``skip``: for good; ``retry``: to run
it again now, outside the campaign's retries); ``abort`` stops it and ends the campaign; a
command for a queued cell applies at once (``skip``), one for a finished cell queues it
again (``retry``); anything else is said to be not applicable. Each is answered by a
``control`` event saying whether it applied.

A command applies at most once to what it is for; a repeat is answered "already applied"
and does nothing (a user pressing the key again, a script sending in a loop: 120 ``retry 1``
in 2 s once killed 18 attempts in a second). A repeat is: a second stop of the same kind
for an attempt already being stopped (in one batch of the inbox, or kept for it and not
taken yet); a kill or skip of the attempt it already stopped, or of a cell that ended so;
and a retry of a cell whose retry was already applied while the attempt that retry
started is starting — not started yet, or running for less than :data:`RETRY_SETTLE_S`
(or a retry sent before that retry was applied). Nobody judges an attempt that young; a
retry sent after that retries it.

With one lane the running attempt reads the inbox itself between its polls
(:meth:`Commands.stop_for`). With several lanes (several devices, a cluster) one thread
reads it (:meth:`Commands.route`, from :mod:`engine.runner.concurrent`) and keeps a stop
for the cell it names on the :class:`~engine.runner.board.Board`, which that cell's
attempt takes.
"""

from __future__ import annotations

import time
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

#: Seconds the attempt a retry started counts as starting once it runs: a retry of the
#: cell arriving meanwhile repeats the one applied (see the module docstring).
RETRY_SETTLE_S = 3.0
#: How a cell ends after a kill or a skip (a later one of the same: a repeat).
ENDS = {"kill": "killed", "skip": "skipped"}
#: The answer's reason for a repeat, first words (what the dashboard and tests look for).
ALREADY = "already applied"


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
        #: cell key → wall-clock time its last retry was applied (stopped, or queued again).
        self.retried: dict[str, float] = {}
        #: cell key → the attempt a kill or skip was applied to (its later ones: repeats).
        self.stopped: dict[str, object] = {}

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
                if not self._abort_ok(command):
                    continue
                self._answer(cmd=name, applied=True)
                if running is None:
                    raise Aborted()
                stop = ("abort", _abort_reason(command))
                continue
            cell = self.find(ref)
            if cell is not None and running is not None and cell.key == running.key:
                stop = self.for_running(command, cell, stop)
            else:
                self.queued(name, ref, cell)
        return stop

    def route(self, command: dict[str, Any]) -> str | None:
        """Apply one command while several cells run (under :attr:`Board.lock`): a stop kept
        for the running cell it names, the one-lane handling for the others. Returns the
        reason to stop every running cell with (an abort), else None."""
        name, ref = command["cmd"], str(command.get("cell") or "")
        if name == "abort":
            if not self._abort_ok(command):
                return None
            self._answer(cmd=name, applied=True)
            return _abort_reason(command)
        cell = self.find(ref)
        if cell is not None and cell.key in self.board.running:
            kept = self.for_running(command, cell, self.board.stops.get(cell.key))
            if kept is not None:
                self.board.stops[cell.key] = kept
            return None
        # Unknown, queued or finished cells: exactly the one-lane handling.
        self.queued(name, ref, cell)
        return None

    def for_running(self, command: dict[str, Any], cell: CellSpec,
                    pending: tuple[str, str] | None) -> tuple[str, str] | None:
        """A kill, skip or retry for the running ``cell``, whose attempt may already have a
        stop ``pending`` (asked earlier in the same batch, or kept for it): answered, and
        the stop to keep returned (``pending`` when this one changes nothing). A kill or
        skip outranks a pending retry (for good beats once more); the rest are repeats or
        not applicable (see the module docstring)."""
        name = command["cmd"]
        what, reason = STOPS[name]
        if pending is not None and pending[0] == "abort":
            self._answer(cmd=name, cell=cell.key, applied=False,
                         reason="the campaign is being aborted")
            return pending
        if pending is not None and pending[0] == what:
            self._answer(cmd=name, cell=cell.key, applied=False,
                         reason=f"{ALREADY}: the attempt is being stopped")
            return pending
        if pending is not None and name == "retry":  # a kill or skip is under way
            self._answer(cmd=name, cell=cell.key, applied=False,
                         reason="the attempt is being stopped for good")
            return pending
        attempt = self.board.attempts.get(cell.key)
        stopping = attempt is not None and self.stopped.get(cell.key) is attempt
        if name == "retry" and stopping:  # taken by the attempt: keep no stop for a later one
            self._answer(cmd=name, cell=cell.key, applied=False,
                         reason="the attempt is being stopped for good")
            return pending
        if name == "retry":
            repeat = self.repeated_retry(command, cell)
            if repeat:
                self._answer(cmd=name, cell=cell.key, applied=False, reason=repeat)
                return pending
            if self.stale_retry(command, cell):
                return pending
            self.retried[cell.key] = time.time()
        else:
            if stopping:
                self._answer(cmd=name, cell=cell.key, applied=False,
                             reason=f"{ALREADY}: the attempt is being stopped")
                return pending
            self.stopped[cell.key] = attempt
            if pending is not None:  # the retry it outranks did not happen
                self.retried.pop(cell.key, None)
        self._answer(cmd=name, cell=cell.key, applied=True,
                     reason=by_pid(command) or None)
        return what, stop_reason(reason, command)

    def repeated_retry(self, command: dict[str, Any], cell: CellSpec) -> str | None:
        """Why a retry of ``cell`` repeats the retry last applied to it (the answer's
        reason), or None: a retry is already applied while the attempt it started has not
        started, or has run less than :data:`RETRY_SETTLE_S`; and for one sent before it
        was applied (it raced that one in the inbox)."""
        applied = self.retried.get(cell.key)
        if applied is None:
            return None
        started = self.board.started_wall.get(cell.key)
        sent = command.get("ts")
        if started is None or started < applied:
            state = "has not started yet"
        elif time.time() < started + RETRY_SETTLE_S:
            state = f"has run less than {RETRY_SETTLE_S:g} s"
        elif isinstance(sent, (int, float)) and sent < applied:
            state = "had not started when this one was sent"
        else:
            return None
        return (f"{ALREADY}: the attempt the last retry started {state}; retry it again "
                f"once it has run {RETRY_SETTLE_S:g} s")

    def repeated_end(self, name: str, cell: CellSpec) -> str | None:
        """Why a command for ``cell``, which is not running, repeats one applied (the
        answer's reason), or None: a retry while the attempt the last retry started has
        not started or has run less than :data:`RETRY_SETTLE_S`; a kill of a cell that
        ended killed, a skip of one that ended skipped."""
        if name == "retry":
            return self.repeated_retry({}, cell)
        ended = self.board.outcomes.get(cell.key)
        if ended is not None and ended.status == ENDS.get(name):
            return f"{ALREADY}: the cell ended {ended.status}"
        return None

    def _abort_ok(self, command: dict[str, Any]) -> bool:
        """An abort names no cell (``fugue-tui control`` refuses one that does); one that
        names a cell is not applied and said so, on this side too."""
        if command.get("cell") in (None, ""):
            return True
        self._answer(cmd="abort", applied=False,
                     reason=f"abort takes no cell (it named {str(command['cell'])!r})")
        return False

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
        repeat = self.repeated_end(name, cell) if cell is not None else None
        if cell is None:
            self._answer(cmd=name, cell=ref, applied=False,
                         reason="no such cell (or an ambiguous key prefix)")
        elif repeat:
            self._answer(cmd=name, cell=cell.key, applied=False, reason=repeat)
        elif name == "skip" and cell in board.queue:
            board.queue.remove(cell)
            board.outcomes[cell.key] = self.skip(cell, "skipped by control command")
            self._answer(cmd=name, cell=cell.key, applied=True)
        elif name == "retry" and cell not in board.queue and cell.key not in board.running:
            board.queue.appendleft(cell)
            board.outcomes.pop(cell.key, None)
            self.retried[cell.key] = time.time()
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


def by_pid(command: dict[str, Any]) -> str:
    """Who a kill named, when it named a process (the dashboard's process view):
    ``pid 123 (python -m …), sent by pid 45``; "" for a kill of the cell."""
    pid = command.get("pid")
    if command.get("cmd") != "kill" or not isinstance(pid, int):
        return ""
    process = str(command.get("process") or "").strip()
    sender = command.get("sender_pid")
    return (f"pid {pid}" + (f" ({process})" if process else "")
            + (f", sent by pid {sender}" if isinstance(sender, int) else ""))


def stop_reason(reason: str, command: dict[str, Any]) -> str:
    """The killed row's reason for a stop by ``command``: the command's, with the process
    it named (:func:`by_pid`)."""
    who = by_pid(command)
    return f"{reason}: {who}" if who else reason


def _abort_reason(command: dict[str, Any]) -> str:
    """The running cells' killed reason for an abort (the sender's reason, when it gave one)."""
    why = str(command.get("reason") or "").strip()
    return (f"campaign aborted by control command ({why})" if why
            else "campaign aborted by control command")
