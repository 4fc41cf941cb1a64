"""Reading the results CSVs back row by row: every complete record, a torn last line (a
write in progress, or one cut off by a crash) left out.

Torch-free; pandas is not imported either (the runner imports this module; the analysis
loads the files through Arrow, :mod:`engine.results.load`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from pathlib import Path

from engine.errors import OutputError


def raise_field_limit() -> None:
    # Long error strings (tracebacks) exceed csv's default 128 KiB field limit.
    if csv.field_size_limit() < 2**31 - 1:
        csv.field_size_limit(2**31 - 1)


def parse_records(text: str) -> tuple[list[list[str]], bool]:
    """Every complete record of ``text`` and whether a torn last one was dropped.

    Torn: the text does not end with a line break, or its last quoted field is still open
    at the end of the data (the csv parser completes such a record only because input ran
    out).
    """
    raise_field_limit()
    state = {"eof": False}

    def lines() -> Iterator[str]:
        yield from io.StringIO(text, newline="")
        state["eof"] = True

    records: list[list[str]] = []
    completed_by_eof = False
    for record in csv.reader(lines()):
        completed_by_eof = state["eof"]
        records.append(record)
    torn = completed_by_eof or (bool(text) and not text.endswith(("\n", "\r")))
    if torn and records:
        records.pop()
    return records, torn


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """All rows of a results CSV as dicts keyed by its header; ``[]`` for a missing file.

    A torn last line (one without its line break at the end of the file, or with an
    unterminated quoted field) is ignored, and so is a malformed row anywhere else (see
    :func:`read_rows_checked`).
    """
    return read_rows_checked(path)[0]


def read_rows_and_tail(path: str | os.PathLike[str]) -> tuple[list[dict[str, str]], bool]:
    """:func:`read_rows`, and whether a torn last line was left out (a reader that shows
    the rows to a user says so: :func:`torn_note`)."""
    rows, torn, _ = read_rows_checked(path)
    return rows, torn


def read_rows_numbered(path: str | os.PathLike[str]
                       ) -> tuple[list[dict[str, str]], list[int], bool, list[str]]:
    """:func:`read_rows_checked` with the 1-based line each row starts on (second)."""
    return _checked(path)


def row_lines(path: str | os.PathLike[str]) -> list[int]:
    """The 1-based line each row of :func:`read_rows_checked` starts on, in the same order
    (for naming a row to the user as ``file:line``)."""
    return _checked(path)[1]


def read_rows_checked(path: str | os.PathLike[str]
                      ) -> tuple[list[dict[str, str]], bool, list[str]]:
    """The rows of a results CSV, whether a torn last line was left out, and one line per
    malformed row left out (for the user: file, line, why; the file is not changed).

    Every row fugue-tui writes has exactly its header's fields, so a record with another
    count was damaged (a line cut short, bytes written over it, an external edit): it is
    no row, and reading it would shift values into the wrong columns or invent a row. A
    damaged record that runs over several lines (an unclosed quote swallowing the lines
    after it) gives those lines back: each is read again as a record of its own, so one
    broken line does not take the rows after it along. Line ends may be ``\n``, ``\r\n``
    or a bare ``\r`` (old Mac editors).
    """
    rows, _, torn, notes = _checked(path)
    return rows, torn, notes


def _checked(path: str | os.PathLike[str]
             ) -> tuple[list[dict[str, str]], list[int], bool, list[str]]:
    """:func:`read_rows_checked` plus the 1-based first line of each row."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], [], False, []
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    raise_field_limit()
    text = data.decode("utf-8-sig", errors="replace")
    lines = list(io.StringIO(text, newline=""))
    records, tail = _records(lines, 0)
    if not records:
        return [], [], tail is not None, []
    header = records[0][2]
    rows: list[dict[str, str]] = []
    starts: list[int] = []
    notes: list[str] = []
    pending = records[1:]
    while True:
        while pending:
            first, last, record = pending.pop(0)
            if not record:  # a blank line
                continue
            if len(record) == len(header):
                rows.append(dict(zip(header, record, strict=False)))
                starts.append(first + 1)
                continue
            notes.append(f"{path}: line {first + 1} has {len(record)} field"
                         f"{'' if len(record) == 1 else 's'} where the header has "
                         f"{len(header)} (damaged): left out; the file is unchanged")
            if last > first:  # give back the lines it swallowed
                pending[:0] = _records(lines[first + 1:last + 1], first + 1)[0]
        if tail is None or tail[1] == tail[0]:
            break
        # An unclosed quote that runs to the end of the file: its first line is the damage
        # (a write in progress is one line), the lines after it are read again.
        notes.append(f"{path}: line {tail[0] + 1} opens a quote that is never closed "
                     f"(damaged): left out; the file is unchanged")
        pending, tail = _records(lines[tail[0] + 1:], tail[0] + 1)
    return rows, starts, tail is not None, notes


def _records(lines: list[str], offset: int
             ) -> tuple[list[tuple[int, int, list[str]]], tuple[int, int] | None]:
    """The complete CSV records of ``lines`` with the 0-based lines each starts and ends on
    (plus ``offset``), and the first and last line of a torn last record left out (None
    when the last record is whole)."""
    state = {"eof": False}

    def feed() -> Iterator[str]:
        yield from lines
        state["eof"] = True

    reader = csv.reader(feed())
    out: list[tuple[int, int, list[str]]] = []
    completed_by_eof = False
    start = 0
    for record in reader:
        completed_by_eof = state["eof"]
        out.append((offset + start, offset + reader.line_num - 1, record))
        start = reader.line_num
    text_end = lines[-1] if lines else ""
    torn = bool(out) and (completed_by_eof or not text_end.endswith(("\n", "\r")))
    if torn:
        first, last, _ = out.pop()
        return out, (first, last)
    return out, None


def torn_note(path: str | os.PathLike[str]) -> str:
    """The line telling a reader that ``path``'s torn last line was left out (reading
    changes nothing; the next append removes it, keeping a backup: engine.results.store)."""
    return (f"{path}: its last line is incomplete (a write in progress, or one cut off) and "
            "was left out; the file is unchanged (the next append removes that line, "
            "keeping a backup)")
