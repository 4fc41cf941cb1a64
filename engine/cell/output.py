"""A cell's output on a disk that may fill up: its event stream (lifecycle events must land
or fail the cell, progress may be dropped), its log streams (a line that cannot be written
is lost, never an exception mid-group) and its one-line messages."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Protocol

from engine.errors import OutputError
from engine.events import EVENTS, Event, EventWriter, parse_event


class CellEvents:
    """The cell's event stream (an :class:`EventWriter`) on a disk that may fill up.

    A write that fails names the events file (``<events.jsonl>: No space left on
    device``). Lifecycle events and the summary raise :class:`OutputError`; progress,
    phase and sample events are dropped instead, so a full disk does not fail a job that
    is still training (its rows decide). The first failure is kept in :attr:`failure`.
    """

    def __init__(self, path: str | Path, **common: Any):
        self.path = Path(path)
        self.failure: OutputError | None = None
        try:
            self._writer = EventWriter(path, **common)
        except OSError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: OSError) -> OutputError:
        error = OutputError(f"{self.path}: {exc.strerror or exc}")
        error.__cause__ = exc
        if self.failure is None:
            self.failure = error
        return error

    def emit(self, type: str, **fields: Any) -> Event:
        """Write one event (:meth:`EventWriter.emit`); returns it (one that was dropped:
        as built, without the envelope).

        Raises:
            OutputError: a lifecycle event or the summary could not be written.
        """
        try:
            return self._writer.emit(type, **fields)
        except OSError as exc:
            error = self._error(exc)
            if type in EVENTS.required:  # the runner and front ends depend on them
                raise error from exc
            return parse_event({"type": type, **fields})

    def write(self, event: Event) -> Event:
        """:meth:`emit` of a built event (a generated class's constructor)."""
        return self.emit(event.type, **event.fields)

    def close(self) -> None:
        try:
            self._writer.close()
        except OSError as exc:
            self._error(exc)


class TolerantStream:
    """A cell's ``sys.stdout``/``sys.stderr``: its log lives in the run folder, on the disk
    that may fill up; a line that cannot be written is lost, never an exception in the
    middle of a group (a ``print`` would otherwise fail the cell with no file named)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Emitter(Protocol):
    """What writes a cell's events: :class:`CellEvents`, or anything with its ``emit``
    (``ctx.emit``'s owner; a stub in tests)."""

    def emit(self, type: str, **fields: Any) -> Any: ...


def say(line: str) -> None:
    """One line to stderr (the cell's log); a log on a full disk must not raise."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)
