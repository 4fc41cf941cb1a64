"""The campaign's cells while it runs: queued, running (and where), stops asked for the
running ones, and how each ended. Torch-free.

The runner's loop (one cell after another, or the concurrent lanes of
:mod:`engine.runner.concurrent`), the control commands (:mod:`engine.runner.commands`)
and the attempts' start hook share one :class:`Board`; with several lanes, under
:attr:`Board.lock` (the journal's lock: the same one that orders the events).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine.define.matrix import CellSpec
from engine.runner.outcome import CellOutcome
from engine.runner.placement import Slot


class StartedAttempt(Protocol):
    """What the board reads of an attempt that started (:class:`engine.runner.attempt.Attempt`)."""

    cell: CellSpec
    dir: Path
    decided_wall: float


@dataclass
class Board:
    """What the runner's loops, its control commands and the lanes share (see the module
    docstring)."""

    #: Serialises the lanes' reads and writes (the journal's lock).
    lock: threading.RLock
    #: Cells still to run, in order (a retry command puts one back in front).
    queue: deque[CellSpec] = field(default_factory=deque)
    #: cell key → how it ended (a retry command takes it out again).
    outcomes: dict[str, CellOutcome] = field(default_factory=dict)
    #: Running cells of a campaign with several lanes: cell key → the lane's device.
    running: dict[str, Slot] = field(default_factory=dict)
    #: Stops asked for running cells (cell key → (what next, reason)), set by the one
    #: thread that reads the control inbox; each attempt takes its own.
    stops: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: cell key → wall-clock time its running attempt was decided (:meth:`attempt_started`).
    started_wall: dict[str, float] = field(default_factory=dict)
    #: Each cell's latest attempt (its folder: the concurrency record goes there).
    attempts: dict[str, StartedAttempt] = field(default_factory=dict)
    #: cell key → retries of the campaign's budget used / node losses run again.
    auto_retries: dict[str, int] = field(default_factory=dict)
    node_losses: dict[str, int] = field(default_factory=dict)
    #: Refreshes the running attempts' concurrency records (set by the lanes).
    on_started: Callable[[], None] | None = None

    def attempt_started(self, attempt: StartedAttempt) -> None:
        """Called once an attempt's process runs: with several devices, the concurrency
        records of every running attempt are brought up to date at once (a neighbour that
        starts and ends between two polls is still counted)."""
        # When it was decided to run (wall clock, as control commands are stamped): a retry
        # sent before then was meant for a cell that had not started (fugue-tui control
        # refuses one; the dashboard's key or a race with the cell's start still sends it).
        self.started_wall[attempt.cell.key] = attempt.decided_wall
        hook = self.on_started
        if hook is not None:
            with self.lock:
                hook()
