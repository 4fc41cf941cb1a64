"""Structured events: one versioned JSON object per line, appended to a cell's
``events.jsonl`` in its run folder.

Types: lifecycle (``queued``, ``started``, ``done``, ``failed``, ``killed``, ``skipped``,
``retried``, ``suspect``, ``hung``), ``job_progress`` (rate-limited at the source),
``job_done``, ``phase`` (data load, setup, group window) and ``summary``. Lifecycle events
are fsync'ed at once; the rest are flushed to the OS (readers see them within one write)
without paying a disk sync on the training path. Readers tolerate a torn last line.
Torch-free.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
LIFECYCLE = frozenset({"queued", "started", "done", "failed", "killed", "skipped",
                       "retried", "suspect", "hung"})


class EventWriter:
    """Append events to ``path``; thread-unsafe by design (one writer per process)."""

    def __init__(self, path: str | Path, **common: Any):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self.common = common

    def emit(self, type: str, **fields: Any) -> dict[str, Any]:
        event = {"v": SCHEMA_VERSION, "ts": time.time(), "type": type, **self.common, **fields}
        self._file.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")
        self._file.flush()
        if type in LIFECYCLE:
            os.fsync(self._file.fileno())
        return event

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


class EventTail:
    """Follow an events file as it grows, yielding whole lines only (a torn last line waits
    for its newline)."""

    def __init__(self, path: str | Path, offset: int = 0):
        self.path = Path(path)
        self._offset = offset
        self._partial = b""

    def read(self) -> Iterator[dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a line corrupted by a crash mid-write: skip, never stop reading


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All whole events of a file (a torn last line is ignored)."""
    return list(EventTail(path).read())
