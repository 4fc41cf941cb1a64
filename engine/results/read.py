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
    """All rows of a results CSV as dicts (``csv.DictReader``); ``[]`` for a missing file.

    A torn last line (one without its line break at the end of the file, or with an
    unterminated quoted field) is ignored. Short rows are padded with ``""``.
    """
    return read_rows_and_tail(path)[0]


def read_rows_and_tail(path: str | os.PathLike[str]) -> tuple[list[dict[str, str]], bool]:
    """:func:`read_rows`, and whether a torn last line was left out (a reader that shows
    the rows to a user says so: :func:`torn_note`)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], False
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    raise_field_limit()
    text = data.decode("utf-8-sig", errors="replace")
    state = {"eof": False}

    def lines() -> Iterator[str]:
        yield from io.StringIO(text, newline="")
        state["eof"] = True

    rows: list[dict[str, str]] = []
    completed_by_eof = False
    for row in csv.DictReader(lines(), restval=""):
        completed_by_eof = state["eof"]
        rows.append(row)
    torn = bool(rows) and (completed_by_eof or not text.endswith(("\n", "\r")))
    if torn:
        rows.pop()
    return rows, torn


def torn_note(path: str | os.PathLike[str]) -> str:
    """The line telling a reader that ``path``'s torn last line was left out (reading
    changes nothing; the next append removes it, keeping a backup: engine.results.store)."""
    return (f"{path}: its last line is incomplete (a write in progress, or one cut off) and "
            "was left out; the file is unchanged (the next append removes that line, "
            "keeping a backup)")
