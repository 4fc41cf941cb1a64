"""Structured events: one versioned JSON object per line, appended to the runner's
``runner.jsonl`` and to each cell attempt's ``events.jsonl`` in the campaign's run folder.

Every event type is declared once, in :data:`EVENTS` (its source, its fields, its roles),
its fields' types in :data:`FIELD_TYPES`; the sets the rest of the code branches on are
derived from that table: lifecycle events (fsync'ed at once, and a cell fails when it
cannot write one), the cell events the watchdog counts as progress, the runner events that
end an attempt, and the cell states those events lead to (active, ended, finished).
``docs/events.md`` is generated from it (:meth:`EventTable.markdown`), and so is
:mod:`engine.event_types`, one typed class per event type (:mod:`engine.event_codegen`).

This is the events' protocol module: the only one that reads and writes their JSON. In
memory an event is its typed class (:mod:`engine.event_base`): :func:`parse_event` turns
a document into one, :class:`EventTail` and :func:`read_events` yield them,
:meth:`EventWriter.emit` returns the one it wrote and :meth:`EventWriter.write` writes one
built with a generated constructor. The builders (:func:`job_started`,
:func:`job_progress`, :func:`job_done`) return a typed event, sent through any
``emit(type, **fields)``: ``job_done(result).send(ctx.emit)``. Progress events are flushed
to the OS (readers see them within one write) without paying a disk sync on the training
path. Every reader goes through :class:`EventTail`, which tolerates torn lines and a file
cut or replaced under it. Torch-free.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import os
import time
import zlib
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

# The sources, the envelope and each source's common fields live with the event classes
# (engine.event_base: the generated module imports them without this one).
from engine.event_base import (  # noqa: F401 - re-exported: engine.events names them
    ABSENT,
    BASES,
    CELL,
    COMMON,
    ENVELOPE,
    MONITOR,
    RUNNER,
    SCHEMA_VERSION,
    SOURCES,
    AttemptEvent,
    CellEvent,
    Event,
    MonitorEvent,
    RunnerEvent,
    draft,
)

# The table (its types, the sets derived from it, the fields' types) has its own module;
# engine.events names everything in it, as it always has.
from engine.event_table import (  # noqa: F401 - re-exported: engine.events names them
    EVENTS,
    FIELD_TYPES,
    FIELD_TYPES_BY_EVENT,
    ROLES,
    EventTable,
    EventType,
    _t,
    field_type,
    is_runner_event,
    source_of,
)
from engine.event_types import CLASSES, CellJobDone, CellJobProgress, CellJobStarted

# -- the typed events ------------------------------------------------------------------
# One class per declared (source, type), generated from the table into engine.event_types
# (checked in, so that mypy sees the classes and their typed fields; tests/unit/
# test_event_types.py fails when the table and the module drift). Regenerate with
#     python -m engine.event_codegen > engine/event_types.py


def event_class(source: str, type: object) -> builtins.type[Event]:
    """The class of events ``type`` of ``source``: the generated one, else (a type this
    version does not know, or one added to :data:`EVENTS` at run time) the source's base
    class."""
    found = CLASSES.get((source, type)) if isinstance(type, str) else None
    return found or BASES[source]


def parse_event(doc: Mapping[str, Any]) -> Event:
    """The typed event of a JSON document (a copy of it: same keys, same order). Tolerant:
    a document of an unknown type is its source's base class, missing and undeclared fields
    are kept as they are (:mod:`engine.event_base`). An :class:`Event` is returned as it is."""
    if isinstance(doc, Event):
        return doc
    kind = doc.get("type")
    source = source_of(doc) if isinstance(kind, str) or kind is None else (
        RUNNER if is_runner_event(doc) else CELL)
    return event_class(source, kind).of(doc)


def event_to_json(event: Mapping[str, Any]) -> str:
    """One line of an events file (without its newline): compact JSON in the event's key
    order, values JSON cannot hold as their ``str``."""
    return json.dumps(event, separators=(",", ":"), default=str)


# -- builders --------------------------------------------------------------------------

class _JobResult(Protocol):
    job: Any
    status: str
    error: str
    total_time_s: float | None
    samples: int
    final_val_acc: float | None


def build(type: str, source: str, /, **fields: Any) -> Event:
    """An event of a declared type, not yet written (its type and ``fields``, in that
    order: :meth:`Event.send`, :meth:`EventWriter.write`). Raises ValueError for an
    undeclared type or field (a typo fails where it is made)."""
    declared = EVENTS.get(type, source)
    if declared is None:
        raise ValueError(f"unknown {source} event type {type!r}")
    unknown = [name for name in fields if name not in declared.declared or name in ENVELOPE]
    if unknown:
        raise ValueError(f"{source} event {type!r}: undeclared fields {unknown}")
    return event_class(source, type).of(draft(type, fields))


def job_started(job_id: str, **extra: Any) -> CellJobStarted:
    """A job starts (``extra``: ``worker_pid`` of the mp or ray worker that trains it)."""
    return cast(CellJobStarted, build("job_started", CELL, job_id=job_id, **extra))


def job_progress(**fields: Any) -> CellJobProgress:
    """A job's progress report, as the training loops pass it to their ``progress``."""
    return cast(CellJobProgress, build("job_progress", CELL, **fields))


def job_done(result: _JobResult, **extra: Any) -> CellJobDone:
    """A job ended: its status, error, time, samples and final validation accuracy, from its
    result (``extra``: ``pid``, ``early_stopped``, ``stop_reason``)."""
    return cast(CellJobDone, build(
        "job_done", CELL, job_id=result.job.job_id, status=result.status, error=result.error,
        total_time_s=result.total_time_s, samples=result.samples,
        final_val_acc=result.final_val_acc, **extra))


class EventWriter:
    """Append events to ``path``; thread-unsafe by design (one writer per process).

    Each event is one line written with ``write(2)`` on an ``O_APPEND`` descriptor, no
    buffer in between: a line lands whole or not at all. A write that fails part-way (a
    full disk, a file size limit) raises ``OSError`` after cutting its own partial line
    off again, so the file holds no torn line for the next event to be glued to (several
    processes append to one events file: the cut is made only while the file still ends
    with our partial line).
    """

    def __init__(self, path: str | Path, **common: Any):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                       | os.O_CLOEXEC, 0o666)
        self.common = common

    def emit(self, type: str, **fields: Any) -> Event:
        """Append one event: the envelope, this writer's common fields, then ``fields`` in
        the order given. Returns it as written (typed: :func:`parse_event`).

        Raises:
            OSError: the line could not be written (see the class); ValueError: closed.
        """
        doc = {"v": SCHEMA_VERSION, "ts": time.time(), "type": type, **self.common, **fields}
        self._append((event_to_json(doc) + "\n").encode())
        if type in EVENTS.lifecycle:
            os.fsync(self._require())
        return parse_event(doc)

    def write(self, event: Event) -> Event:
        """Append ``event`` (built, not yet written: a generated class's constructor,
        :func:`build`): :meth:`emit` of its type and fields."""
        return self.emit(event.type, **event.fields)

    def _require(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: event writer is closed")
        return self._fd

    def _append(self, data: bytes) -> None:
        fd = self._require()
        done = 0
        try:
            while done < len(data):
                n = os.write(fd, data[done:])
                if n == 0:  # no progress and no error: treat as a full disk
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
        except OSError:
            if done:
                self._cut(fd, done)
            raise

    @staticmethod
    def _cut(fd: int, written: int) -> None:
        """Remove the ``written`` bytes of a line that could not be completed."""
        with contextlib.suppress(OSError):
            end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just after our bytes
            if os.fstat(fd).st_size == end:     # nobody appended after them
                os.ftruncate(fd, end - written)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


class EventTail:
    """Follow an events file as it grows, yielding each whole event once. The one reader of
    events files (the runner's watchdog, the front ends' follower, replay, report), tolerant
    of what can happen to the file underneath:

    - a torn last line waits for its newline;
    - a line that is not JSON (a write cut short by a full disk or a crash, with the next
      event appended to its fragment) yields the whole event it ends with, if any — events
      start with ``{"v":`` (:data:`ENVELOPE` order) — and is skipped otherwise: reading
      resynchronises at the next newline;
    - a file cut shorter (``truncate``, a tool rewriting it) while its writers append — they
      write in append mode, so right after the cut — or replaced by another file is read
      again from the beginning, and only what is new is yielded: the lines before the first
      one that differs from what was read (same offsets, same bytes) are skipped. Nothing is
      yielded twice and nothing written after the cut is lost; a cut is noticed by the
      file being shorter than what was read, another file, or no newline where the last line
      read ended (so also when the file has grown past that point again).

    ``offset`` is where to start reading (a line's start); a file cut before it is read from
    its beginning. Memory: 8 bytes per line read (its length and a hash, to find a cut).

    ``hold``: keep reading the file first opened (its descriptor is kept until
    :meth:`close`), whatever the path names later. The runner tails its cell's events
    this way: the cell appends on the descriptor it opened, so after the file is replaced
    by rename (an editor, ``sed -i``) its events go on arriving in the old file, and a
    tail that followed the path would see no progress and kill a healthy cell.
    """

    #: Where every event's JSON starts (what a torn line is searched for).
    START = b'{"v":'

    def __init__(self, path: str | Path, offset: int = 0, *, hold: bool = False):
        self.path = Path(path)
        self._hold = hold
        self._handle: BinaryIO | None = None  # the file held (hold=True), once opened
        self._start = self._offset = offset  # always a line's start
        self._file: tuple[int, int] | None = None  # (device, inode) of the file read
        self._lengths = array("I")  # of the lines read since _start, in order
        self._hashes = array("i")

    def read(self) -> Iterator[Event]:
        """The whole events appended since the last call, typed (:func:`parse_event`;
        each is also the read-only dict of its JSON line)."""
        if self._hold:
            held = self.opened()
            if held is None:
                return
            lines = self._new_lines(held)
        else:
            try:
                with open(self.path, "rb") as handle:
                    lines = self._new_lines(handle)
            except FileNotFoundError:
                return
        for line in lines:
            doc = _decode(line)
            if doc is not None:
                yield parse_event(doc)

    def opened(self) -> BinaryIO | None:
        """With ``hold``: the file held, opened now if it was not yet (None while there
        is no file at the path)."""
        if self._handle is None:
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - held until close()
            except FileNotFoundError:
                return None
        return self._handle

    def close(self) -> None:
        """Let go of the file held (``hold``); reading again opens the path anew."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()

    def _new_lines(self, handle) -> list[bytes]:
        """The whole lines after the last one read; moves past them."""
        stat = os.fstat(handle.fileno())
        ident = (stat.st_dev, stat.st_ino)
        if self._file is not None and (ident != self._file or self._cut(handle, stat.st_size)):
            self._resync(handle, stat.st_size)
        self._file = ident
        handle.seek(self._offset)
        data = handle.read()
        end = data.rfind(b"\n") + 1  # an unfinished last line is read again next time
        lines = data[:end].split(b"\n")[:-1]
        self._offset += end
        for line in lines:
            self._remember(line)
        return lines

    def _cut(self, handle, size: int) -> bool:
        """Whether the file no longer holds what was read: shorter, or no newline where
        the last line read ended."""
        if size < self._offset:
            return True
        if self._offset <= self._start:
            return False
        handle.seek(self._offset - 1)
        return handle.read(1) != b"\n"

    def _resync(self, handle, size: int) -> None:
        """Continue at the first line that differs from what was read (see the class)."""
        if size < self._start:
            self._start = 0
            del self._lengths[:], self._hashes[:]
        handle.seek(self._start)
        data = handle.read()
        pos, same = 0, 0
        for length, digest in zip(self._lengths, self._hashes, strict=True):
            line = data[pos:pos + length]
            if data[pos + length:pos + length + 1] != b"\n" or _hash(line) != digest:
                break
            pos += length + 1
            same += 1
        del self._lengths[same:], self._hashes[same:]
        self._offset = self._start + pos

    def _remember(self, line: bytes) -> None:
        self._lengths.append(len(line))
        self._hashes.append(_hash(line))


def _hash(line: bytes) -> int:
    return zlib.crc32(line) - 2**31  # fits a signed 32-bit array


def _decode(line: bytes) -> dict[str, Any] | None:
    """The event on ``line``: the line itself, else the whole event it ends with (a torn
    write's fragment followed by the next event), else None (garbage, skipped)."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
        return event if isinstance(event, dict) else None
    except ValueError:  # JSON or UTF-8
        pass
    at = line.find(EventTail.START, 1)
    while at != -1:
        try:
            event = json.loads(line[at:])
        except ValueError:
            at = line.find(EventTail.START, at + 1)
            continue
        return event if isinstance(event, dict) else None
    return None


def last_line_of(path: str | Path, type: str) -> int:
    """Byte offset of the start of the last line of events file ``path`` holding an event of
    ``type`` (0 when none, or no file). Scans the bytes for the writer's own spelling of the
    type (:func:`event_to_json`: compact), without parsing every line: ``runner.jsonl``
    grows by a session each run."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return 0
    needle = f'"type":{json.dumps(type)}'.encode()
    offset, last = 0, 0
    for line in data.splitlines(keepends=True):
        if needle in line:
            last = offset
        offset += len(line)
    return last


def read_events(path: str | Path) -> list[Event]:
    """All whole events of a file, typed (a torn last line is ignored)."""
    return list(EventTail(path).read())


if __name__ == "__main__":  # python -m engine.events > docs/events.md
    print(EVENTS.markdown())
