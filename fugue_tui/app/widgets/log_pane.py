"""The selected cell attempt's ``cell.log``, followed as it grows.

The file is read by the run screen's follow worker (:class:`LogTail`, no widget access);
the widget only receives lines through messages.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import Log

#: Bytes of an existing log shown when a cell is selected (its tail).
INITIAL_BYTES = 32_768
#: Lines the pane keeps.
MAX_LINES = 5000


class LogTail:
    """Incremental reader of one file at a time (used from a worker thread)."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._offset = 0
        self._partial = b""

    def read(self, path: str | None) -> tuple[list[str], bool]:
        """New whole lines of ``path``; ``reset`` is True when the path changed (the lines
        then start with the file's last :data:`INITIAL_BYTES`)."""
        reset = path != self.path
        if reset:
            self.path, self._partial = path, b""
            try:
                size = Path(path).stat().st_size if path else 0
            except OSError:
                size = 0
            self._offset = max(0, size - INITIAL_BYTES)
        if not path:
            return [], reset
        notes: list[str] = []
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:
                    # Cut shorter underneath us (a full disk, a tool rewriting it): reading
                    # on from the old offset would show nothing ever again. Start over at
                    # its current tail, and say so rather than silently skipping.
                    notes.append(f"(log cut to {size} bytes; reading from its tail again)")
                    self._offset, self._partial = max(0, size - INITIAL_BYTES), b""
                handle.seek(self._offset)
                chunk = handle.read(1_000_000)
        except OSError:
            return [], reset
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return notes + [line.decode("utf-8", "replace").rstrip("\r") for line in lines], reset


class LogPane(Log):
    """A log view of one cell attempt (lines arrive via :meth:`feed`)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=MAX_LINES, auto_scroll=True, **kwargs)

    def feed(self, lines: list[str], reset: bool, title: str = "") -> None:
        if reset:
            self.clear()
            if title:
                self.border_title = title
        if lines:
            self.write_lines(lines)
