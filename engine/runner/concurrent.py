"""Several cells at once: one per device of a multi-device campaign (issue 27). Torch-free.

:func:`run_lanes` is the runner's loop when the campaign has more than one lane (its
placement strategy, :mod:`engine.runner.strategy`, calls it; :mod:`engine.runner.placement`
decides which device each cell runs on). Each device has a
thread that runs its cells one after another, each attempt exactly as the one-device
runner runs it (:class:`engine.runner.attempt.Attempt`: its own process pinned by UUID, its
own monitor on its own device, its own watchdog). The main thread alone reads the control
inbox and the signals: a command for a running cell is kept for that cell's attempt (which
stops it as it always did; :mod:`engine.runner.commands`), commands for queued cells apply
at once, and Ctrl-C, an abort or a write that failed stop every running cell and record
each one. The lanes get the board of cells, the commands and what runs one cell: never
the runner.

While cells overlap, the runner writes each attempt's ``host_cells.json``: the most cells
that ran on the host at once during its process (``max``) and whether a cell on another
slice of the same physical GPU ran meanwhile (``mig_shared``, with those slices). The
cell reads it when it writes its rows (``host_concurrent_cells``; MIG energy left empty
with its reason: power belongs to the whole card).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.cell.protocol import HOST_CELLS, write_host_cells
from engine.runner.attempt import INTERRUPTED_BY, POLL_S, Aborted

if TYPE_CHECKING:
    from engine.define.matrix import CellSpec
    from engine.runner.board import Board
    from engine.runner.commands import Commands
    from engine.runner.outcome import CellOutcome
    from engine.runner.placement import Slot


@dataclass(frozen=True)
class Lanes:
    """What the concurrent lanes work with: one lane per ``slots`` entry, ``lane_of`` (cell
    key → slot index), the ``board`` of cells (its lock guards what the lanes share), the
    control ``commands``, ``run_cell`` (all attempts of one cell, its outcome) and whether
    only one cell may run on the host at once."""

    slots: list[Slot]
    lane_of: dict[str, int]
    board: Board
    commands: Commands
    run_cell: Callable[[CellSpec], CellOutcome]
    one_at_a_time: bool = field(default=False)


def run_lanes(lanes: Lanes) -> None:
    """Run ``lanes.board.queue`` over ``lanes.slots``, each cell on its placed device, up to
    one cell per device at once (one at a time on the host with ``one_cell_per_host``).

    Raises:
        KeyboardInterrupt: after every running cell was stopped and recorded as killed.
        Aborted: an abort command (the running cells recorded as killed).
        OutputError: a write failed (the other running cells stopped and recorded first).
    """
    state = _State(lanes)
    lanes.board.on_started = state.concurrency
    threads = [threading.Thread(target=state.worker, args=(slot,), daemon=True,
                                name=f"fugue-slot-{slot.index}") for slot in lanes.slots]
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads):
            state.dispatch()
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        state.halt("stop", f"interrupted ({INTERRUPTED_BY[0]})", "interrupt")
        _join(threads)
        raise
    except BaseException as exc:  # the runner's own write failed: stop and record the rest
        state.halt("stop", f"campaign stopped: {exc}", "error")
        _join(threads)
        raise
    _join(threads)
    if state.error is not None:
        raise state.error
    if state.aborted:
        raise Aborted()


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        while thread.is_alive():  # a Ctrl-C now is ignored (the handler set SIG_IGN)
            thread.join(timeout=POLL_S)


class _State:
    """What the device threads and the main thread share (under the board's lock)."""

    def __init__(self, lanes: Lanes):
        self.lanes, self.board, self.lock = lanes, lanes.board, lanes.board.lock
        self.halted = ""            # "", "interrupt", "abort" or "error": take no new cell
        self.aborted = False
        self.error: BaseException | None = None
        #: cell key → the concurrency record written for its running attempt
        self.records: dict[str, dict[str, Any]] = {}
        self.one_at_a_time = lanes.one_at_a_time

    # -- the device threads ---------------------------------------------------------------
    def worker(self, slot: Slot) -> None:
        board = self.board
        while True:
            cell = self._next(slot)
            if cell is None:
                return
            try:
                board.outcomes[cell.key] = self.lanes.run_cell(cell)
            except Aborted:
                with self.lock:
                    self.aborted = True
                    self._halt_locked("abort", "campaign aborted by control command", "abort")
            except BaseException as exc:  # OutputError: the campaign cannot go on
                with self.lock:
                    if self.error is None:
                        self.error = exc
                    self._halt_locked("stop", f"campaign stopped: {exc}", "error")
            finally:
                self._ended(cell)

    def _next(self, slot: Slot) -> CellSpec | None:
        """The next queued cell placed on ``slot`` (it becomes running), or None when the
        campaign is done for this device. Waits while others run: a retry command may
        queue one of this device's cells again until the last cell ends."""
        board, lane_of = self.board, self.lanes.lane_of
        while True:
            with self.lock:
                if self.halted:
                    return None
                busy = bool(board.running)
                mine = [c for c in board.queue if lane_of[c.key] == slot.index]
                if mine and not (self.one_at_a_time and busy):
                    cell = mine[0]
                    board.queue.remove(cell)
                    board.running[cell.key] = slot
                    return cell
                if not board.queue and not busy:
                    return None
            time.sleep(POLL_S)

    def _ended(self, cell: CellSpec) -> None:
        with self.lock:
            self.board.running.pop(cell.key, None)
            self.records.pop(cell.key, None)

    # -- the main thread ------------------------------------------------------------------
    def dispatch(self) -> None:
        """Apply the control inbox (kept stops for running cells) and refresh the running
        attempts' concurrency records."""
        with self.lock:
            for command in self.lanes.commands.poll():
                self._command(command)
            self.concurrency()

    def _command(self, command: dict[str, Any]) -> None:
        reason = self.lanes.commands.route(command)
        if reason is not None:  # abort: every running cell stops, no new one starts
            self.aborted = True
            self._halt_locked("abort", reason, "abort")

    def halt(self, what: str, reason: str, why: str) -> None:
        with self.lock:
            self._halt_locked(what, reason, why)

    def _halt_locked(self, what: str, reason: str, why: str) -> None:
        """Take no new cell; stop every running one with ``reason``."""
        if not self.halted:
            self.halted = why
        for key in self.board.running:
            self.board.stops.setdefault(key, (what, reason))

    def concurrency(self) -> None:
        """Each running attempt's ``host_cells.json`` (under the board's lock): the most
        cells at once so far and the other slices of its physical GPU that ran meanwhile;
        rewritten whenever it grew (or its last write failed)."""
        running: dict[str, Slot] = dict(self.board.running)
        for key, slot in running.items():
            attempt = self.board.attempts.get(key)
            if attempt is None or attempt.cell.key != key or not attempt.dir.is_dir():
                continue  # not started yet: counted once it is
            record = self.records.setdefault(key, {"max": 0, "mig_shared": [], "dir": ""})
            changed = record["dir"] != str(attempt.dir)  # a new attempt of the cell
            if changed:
                record.update(max=0, mig_shared=[], dir=str(attempt.dir))
            if len(running) > record["max"]:
                record["max"], changed = len(running), True
            if slot.gpu.get("parent_uuid"):
                for other_key, other in running.items():
                    if (other_key != key and other.parent == slot.parent
                            and other.uuid not in record["mig_shared"]):
                        record["mig_shared"].append(other.uuid)
                        changed = True
            if changed or not record.get("written"):
                try:
                    write_host_cells(attempt.dir, record["max"], record["mig_shared"])
                    record["written"] = True
                except OSError:  # the next poll tries again; the cell may then say nothing
                    record["written"] = False

__all__ = ["run_lanes", "Lanes", "HOST_CELLS"]
