"""How long a running cell's processes were stopped (issue 43): a cell held by SIGSTOP
(job control, a debugger, a tool pausing it) keeps its group window open, so ``T_group``
counts the stopped time; the row says how much in ``stopped_s`` and the cell warns.

The runner looks at the cell's processes as its guard finds them (the cell's session:
the leader, its descendants, and what stays in the session; :func:`session_processes`)
and at those outside the session that registered in the attempt's ``stacks/`` folder
(:mod:`engine.stacks`: Ray's workers run in the sessions of the Ray runtime, not the
cell's; a registration counts while its pid still has the start time it registered with),
at most every :data:`CHECK_S` seconds: the time between two looks counts as stopped when
at least one of them is stopped (``T``/``t`` state) at the second look. Resolution:
:data:`CHECK_S`. The running total goes to the attempt folder's ``stopped.json``
(:func:`engine.cell.protocol.write_stopped`), which the cell reads for its group row.
Torch-free.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import psutil

from engine import stacks
from engine.cell.protocol import write_stopped
from engine.runfolder import AttemptFolder
from engine.runner.watchdog import session_processes

#: Seconds between two looks at the cell's processes' states.
CHECK_S = 0.25

_STOPPED = {psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP}


class StopClock:
    """Adds up the time a cell's processes were seen stopped; see the module doc."""

    def __init__(self, attempt_dir: Path, pid: int) -> None:
        self.attempt_dir, self.pid = attempt_dir, pid
        self.total = 0.0
        self._last = time.monotonic()
        self._written: float | None = None
        self._save()  # 0.0: tracked, none yet (an empty column means not tracked)

    def check(self) -> None:
        """Look now if :data:`CHECK_S` passed since the last look."""
        now = time.monotonic()
        if now - self._last < CHECK_S:
            return
        if self._any_stopped():
            self.total += now - self._last
        self._last = now
        self._save()

    def _any_stopped(self) -> bool:
        for proc in session_processes(self.pid, self.pid) + self._registered():
            with contextlib.suppress(psutil.Error):
                if proc.status() in _STOPPED:
                    return True
        return False

    def _registered(self) -> list[psutil.Process]:
        """The processes registered in the attempt's ``stacks/`` that are still the ones
        that registered (same start time: never a reused pid)."""
        out = []
        for reg in stacks.registered(AttemptFolder(self.attempt_dir).stacks):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(reg.pid)
                if reg.started is None or abs(proc.create_time() - reg.started) <= 0.05:
                    out.append(proc)
        return out

    def _save(self) -> None:
        if self._written == self.total:
            return
        with contextlib.suppress(OSError):  # a full disk: the next look tries again
            write_stopped(self.attempt_dir, self.total)
            self._written = self.total
