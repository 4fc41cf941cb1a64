"""What a runner writes while its campaign runs, in one place: its event log
(``runner.jsonl``), the group rows it writes for cells that could not write their own
(killed, crashed, skipped), the rows a cluster node's agent sends, and the lock that keeps
those writes whole and in order when several attempts run at once. Torch-free.

Every event the runner writes, and every cell event an attempt forwards, goes to the
runner's ``on_event`` callback from here, in order (front ends in other processes follow
the files instead). Attempts, the concurrent lanes and the placement strategies write
through a :class:`Journal`, never through the runner. Events are typed objects
(:mod:`engine.event_types`) and specs :class:`~engine.cell.protocol.CellRunSpec` here;
JSON is written by :mod:`engine.events` and :mod:`engine.results.store` only.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.cell.protocol import CellRunSpec, read_stopped
from engine.errors import FugueError, OutputError
from engine.event_base import Event
from engine.event_types import RunnerFailed, RunnerKilled, RunnerSkipped, RunnerWarning
from engine.events import EventWriter
from engine.results.columns import GROUPS_FILE, header
from engine.results.commit import append_failed_group
from engine.results.read import read_rows
from engine.results.rows import failed_group_row
from engine.results.store import append_rows

#: A receiver of events (the runner's ``on_event``): each typed event (a read-only dict of
#: its JSON document, :mod:`engine.event_base`).
EventFn = Callable[[Event], None]
#: The NVML identity of the device a spec's ``gpu_uuid`` names (None: no GPU known).
GpuFor = Callable[[str | None], Mapping[str, Any] | None]


class Journal:
    """The runner's writes of one campaign (see the module docstring).

    ``runs_dir``: the folder of the results files; ``campaign_id``: the campaign every
    event and row is of; ``on_event``: called with every event, under :attr:`lock`;
    ``gpu_for``: the device a failed row names (``gpu_name``), by the spec's ``gpu_uuid``.
    """

    def __init__(self, runs_dir: Path, campaign_id: str, on_event: EventFn,
                 gpu_for: GpuFor = lambda uuid: None):
        self.runs_dir, self.campaign_id = Path(runs_dir), campaign_id
        self.on_event, self.gpu_for = on_event, gpu_for
        #: Serialises what the concurrent attempts of a multi-device or cluster campaign
        #: share: the event log, the rows files, the callback, and (taken by the lanes and
        #: the control commands) the board of queued and running cells.
        self.lock = threading.RLock()
        self._log: EventWriter | None = None

    # -- the event log ----------------------------------------------------------------------
    def open(self, path: Path) -> None:
        """Start appending to the runner's event log at ``path`` (``runner.jsonl``)."""
        self._log = EventWriter(path, campaign=self.campaign_id)

    def close(self) -> None:
        """Stop appending (a close that fails changes nothing already written)."""
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()

    def emit(self, event: Event) -> Event:
        """Append a runner event (built, not yet written: a class of
        :mod:`engine.event_types`) and pass it to ``on_event``; returns it as written (its
        envelope and the campaign added).

        Raises:
            OutputError: ``runner.jsonl`` cannot be written (a full disk), naming it.
            RuntimeError: the log was never opened (:meth:`open`).
        """
        if self._log is None:
            raise RuntimeError("the runner's event log is not open")
        with self.lock:  # concurrent attempts: one whole line at a time, in order
            try:
                written = self._log.write(event)
            except OSError as exc:
                raise OutputError(f"{self._log.path}: {exc.strerror or exc}") from exc
            self.on_event(written)
        return written

    def forward(self, event: Event) -> None:
        """Pass a cell's event on to ``on_event`` (several attempts forward at once with
        several devices: one call at a time)."""
        with self.lock:
            self.on_event(event)

    # -- rows -------------------------------------------------------------------------------
    def append(self, name: str, rows: Sequence[Mapping[str, Any]], cell: str,
               attempt: int) -> None:
        """Append ``rows`` to the results file ``name`` under the runs folder (whole rows
        only, :mod:`engine.results.store`); an upgrade or a repair of the file, with its
        backup, is told as a ``warning`` event of ``cell``'s ``attempt``.

        Raises:
            OutputError: the file cannot be written (a full disk), one line naming it.
        """
        with self.lock:
            repaired = append_rows(self.runs_dir / name, rows, header(name))
        for line in repaired:
            self.emit(RunnerWarning(message=line, cell=cell, attempt=attempt))

    def record(self, spec: CellRunSpec, status: str, error: str) -> None:
        """The group row of an attempt that ended without writing its own (``status``
        killed, failed or skipped; ``error`` its one line), from its spec."""
        # The device's name as NVML gave it to the runner (the same NVML device the
        # cell's monitor reads by UUID): the row of a cell that died before its monitor
        # started still says which GPU it ran on.
        gpu = self.gpu_for(spec.gpu_uuid)
        extra: dict[str, Any] = {"gpu_name": gpu["name"]} if gpu and gpu.get("name") else {}
        if spec.events:  # the time its processes were seen stopped (engine.runner.stopped)
            extra["stopped_s"] = read_stopped(Path(spec.events).parent)
        # The group row commits the group's job rows (engine.results.commit): job rows a
        # killed cell left under the same group id are removed first, never committed.
        with self.lock:
            told = append_failed_group(self.runs_dir, failed_group_row(spec, status, error,
                                                                        extra))
        for line in told:
            self.emit(RunnerWarning(message=line, cell=spec.cell.key, attempt=spec.attempt))

    def ended(self, spec: CellRunSpec, event: RunnerKilled | RunnerFailed | RunnerSkipped) -> None:
        """The runner ended (or skipped) an attempt itself: its group row (status: the
        event's type; error: its reason, or its error for ``failed``), then the event, in
        that order (a front end that sees the event finds the row)."""
        text = event.error if isinstance(event, RunnerFailed) else event.reason
        self.record(spec, event.TYPE, text or "")
        self.emit(event)

    def has_row(self, spec: CellRunSpec) -> bool:
        """Whether the attempt already has its group row (a cell that wrote its rows but
        could not send the event saying so): the runner never adds a second one."""
        key, attempt = spec.cell.key, str(spec.attempt)
        try:
            rows = read_rows(self.runs_dir / GROUPS_FILE)
        except (OSError, FugueError):
            return False
        return any(r.get("cell_key") == key and r.get("attempt") == attempt
                   and r.get("campaign_id") == self.campaign_id for r in rows)
