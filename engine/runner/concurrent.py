"""Several cells at once: one per device of a multi-device campaign (issue 27). Torch-free.

:func:`run_slots` is the runner's loop when the campaign has more than one device
(:mod:`engine.runner.placement` decides which device each cell runs on). Each device has a
thread that runs its cells one after another, each attempt exactly as the one-device
runner runs it (:class:`engine.runner.attempt.Attempt`: its own process pinned by UUID, its
own monitor on its own device, its own watchdog). The main thread alone reads the control
inbox and the signals: a command for a running cell is kept for that cell's attempt (which
stops it as it always did), commands for queued cells apply at once, and Ctrl-C, an abort
or a write that failed stop every running cell and record each one.

While cells overlap, the runner writes each attempt's ``host_cells.json``: the most cells
that ran on the host at once during its process (``max``) and whether a cell on another
slice of the same physical GPU ran meanwhile (``mig_shared``, with those slices). The
cell reads it when it writes its rows (``host_concurrent_cells``; MIG energy left empty
with its reason: power belongs to the whole card).
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from engine.cell.concurrency import HOST_CELLS
from engine.runner.attempt import INTERRUPTED_BY, POLL_S, Aborted, Attempt

if TYPE_CHECKING:
    from engine.define.matrix import CellSpec
    from engine.runner.placement import Slot
    from engine.runner.supervisor import Runner



def run_slots(runner: Runner) -> None:
    """Run ``runner.queue`` over ``runner.slots``, each cell on its placed device, up to one
    cell per device at once (one at a time on the host with ``one_cell_per_host``).

    Raises:
        KeyboardInterrupt: after every running cell was stopped and recorded as killed.
        Aborted: an abort command (the running cells recorded as killed).
        OutputError: a write failed (the other running cells stopped and recorded first).
    """
    state = _State(runner)
    runner._concurrency_hook = state.concurrency
    threads = [threading.Thread(target=state.worker, args=(slot,), daemon=True,
                                name=f"fugue-slot-{slot.index}") for slot in runner.slots]
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
    """What the device threads and the main thread share (under ``runner._lock``)."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.halted = ""            # "", "interrupt", "abort" or "error": take no new cell
        self.aborted = False
        self.error: BaseException | None = None
        #: cell key → the concurrency record written for its running attempt
        self.records: dict[str, dict[str, Any]] = {}
        self.one_at_a_time = runner.campaign.one_cell_per_host

    # -- the device threads ---------------------------------------------------------------
    def worker(self, slot: Slot) -> None:
        runner = self.runner
        while True:
            cell = self._next(slot)
            if cell is None:
                return
            try:
                runner.outcomes[cell.key] = runner._run_cell(cell)
            except Aborted:
                with runner._lock:
                    self.aborted = True
                    self._halt_locked("abort", "campaign aborted by control command", "abort")
            except BaseException as exc:  # OutputError: the campaign cannot go on
                with runner._lock:
                    if self.error is None:
                        self.error = exc
                    self._halt_locked("stop", f"campaign stopped: {exc}", "error")
            finally:
                self._ended(cell)

    def _next(self, slot: Slot) -> CellSpec | None:
        """The next queued cell placed on ``slot`` (it becomes running), or None when the
        campaign is done for this device. Waits while others run: a retry command may
        queue one of this device's cells again until the last cell ends."""
        runner = self.runner
        while True:
            with runner._lock:
                if self.halted:
                    return None
                busy = bool(runner._running)
                mine = [c for c in runner.queue if runner.placement[c.key] == slot.index]
                if mine and not (self.one_at_a_time and busy):
                    cell = mine[0]
                    runner.queue.remove(cell)
                    runner._running[cell.key] = slot  # type: ignore[assignment]
                    return cell
                if not runner.queue and not busy:
                    return None
            time.sleep(POLL_S)

    def _ended(self, cell: CellSpec) -> None:
        with self.runner._lock:
            self.runner._running.pop(cell.key, None)
            self.records.pop(cell.key, None)

    # -- the main thread ------------------------------------------------------------------
    def dispatch(self) -> None:
        """Apply the control inbox (kept stops for running cells) and refresh the running
        attempts' concurrency records."""
        runner = self.runner
        with runner._lock:
            for command in runner.inbox.poll():
                self._command(command)
            self.concurrency()

    def _command(self, command: dict[str, Any]) -> None:
        runner = self.runner
        name, ref = command["cmd"], str(command.get("cell") or "")
        if name == "abort":
            runner._emit("control", cmd=name, applied=True)
            why = str(command.get("reason") or "").strip()
            reason = (f"campaign aborted by control command ({why})" if why
                      else "campaign aborted by control command")
            self.aborted = True
            self._halt_locked("abort", reason, "abort")
            return
        cell = runner.find(ref)
        if cell is not None and cell.key in runner._running:
            if runner.stale_retry(command, cell):
                return
            runner._emit("control", cmd=name, cell=cell.key, applied=True)
            runner._stops[cell.key] = {
                "kill": ("stop", "killed by control command"),
                "skip": ("stop", "skipped by control command"),
                "retry": ("retry", "stopped for a retry by control command")}[name]
            return
        # Unknown, queued or finished cells: exactly the one-device runner's handling.
        runner._queued_command(name, ref, cell)

    def halt(self, what: str, reason: str, why: str) -> None:
        with self.runner._lock:
            self._halt_locked(what, reason, why)

    def _halt_locked(self, what: str, reason: str, why: str) -> None:
        """Take no new cell; stop every running one with ``reason``."""
        if not self.halted:
            self.halted = why
        for key in self.runner._running:
            self.runner._stops.setdefault(key, (what, reason))

    def concurrency(self) -> None:
        """Each running attempt's ``host_cells.json`` (under ``runner._lock``): the most
        cells at once so far and the other slices of its physical GPU that ran meanwhile;
        rewritten whenever it grew (or its last write failed)."""
        runner = self.runner
        running: dict[str, Slot] = dict(runner._running)  # type: ignore[arg-type]
        for key, slot in running.items():
            attempt = runner.current_attempt.get(key)
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
                    tmp = attempt.dir / (HOST_CELLS + ".tmp")
                    tmp.write_text(json.dumps({k: record[k] for k in ("max", "mig_shared")}))
                    tmp.replace(attempt.dir / HOST_CELLS)
                    record["written"] = True
                except OSError:  # the next poll tries again; the cell may then say nothing
                    record["written"] = False

__all__ = ["run_slots", "HOST_CELLS", "Attempt"]
