"""One campaign's group rows, read incrementally from a runs folder's ``master_groups.csv``:
what a live view needs at each cell end without reading the whole folder again.

The runs folder's group file holds every campaign ever run there (hundreds of rows): a
dashboard that reloaded it at each cell end spent its CPU budget on rows it had already
read (issue 47, item 2). :class:`GroupTail` remembers the byte offset it read up to and
parses only what was appended since (the store appends in place, :mod:`engine.results.store`);
it keeps the rows of its campaign only. A file replaced (a header upgrade or a repair
rewrites it: another inode) or shorter than the offset is read again from its start.

Rows are what :func:`engine.results.load.load_runs` would keep: complete records only (a
record still being written waits for the next call), a record with another field count
than the header left out, and the rows :mod:`engine.results.load` drops for an impossible
value left out too. :meth:`GroupTail.runs` normalises them as
:func:`engine.results.load.runs_from_frames` does (no job rows: the strip's speedups need none).

The work per update is O(new rows), not O(rows so far): at each cell end the dashboard's
strip spent ~25 ms normalising every row of the campaign again and ~10 ms of pandas checking
the one new row for impossible values, and both grew with the campaign (the CPU share
climbed by thirds). So a record whose numbers are all plain decimals within their range
(:func:`_plainly_possible`: the common case) is kept without pandas; any other goes through
:func:`engine.results.load._drop_impossible` (the rule and its note). And each such row, ok,
is normalised once, as it arrives, in Python (:func:`_normalised_ok`: what
:func:`engine.results.load.runs_from_frames` does to an ok row, ~20 ms of fixed pandas cost
a call otherwise), the frame built from them per answer. Once a record that is not ``ok``
(its fills read the ok rows of its cell) or whose numbers are not plain arrived, every later
answer normalises all rows together with pandas, as a whole load does (a rare case).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.results.columns import GROUPS_FILE, numeric_columns, text_columns
from engine.results.load import Runs, _drop_impossible, runs_from_frames
from engine.results.values import value_range

#: A number as the CSV files hold it and every parser reads alike (Python's float, Arrow,
#: pandas): no spaces, no underscores, no words (nan, inf: those go the pandas way).
_PLAIN = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


class GroupTail:
    """The group rows of campaign ``campaign`` in the group file ``path`` (a runs folder's
    ``master_groups.csv``), read up to the last complete record at each :meth:`update`.

    ``bytes_read`` and ``rows_parsed`` count what all updates read and parsed (every
    campaign's rows parsed, its own kept): they tell a test that an update reads only what
    was appended since the last one. ``checked_by_pandas`` counts the records checked for
    impossible values the slow way, ``rows_normalised`` the rows :meth:`runs` normalised
    (each once while every row is ``ok``).
    """

    def __init__(self, path: str | os.PathLike[str], campaign: str) -> None:
        self.path = Path(path)
        self.campaign = campaign
        self.bytes_read = 0
        self.rows_parsed = 0
        self.checked_by_pandas = 0
        self.rows_normalised = 0
        self.notes: list[str] = []
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._identity = identity
        self._offset = 0
        self._header: list[str] | None = None
        self._records: list[list[str]] = []
        self._runs: Runs | None = None
        #: Every record ok, its numbers plain: normalised one by one (``_rows``).
        self._fast = True
        self._rows: list[dict[str, Any]] = []
        self._empty: tuple[tuple[str, ...], Runs] | None = None

    def update(self) -> bool:
        """Read what was appended since the last call; True when rows of the campaign
        arrived (or the file was read again from its start). A missing file is no rows."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        identity = (st.st_dev, st.st_ino)
        restart = identity != self._identity or st.st_size < self._offset
        if restart:
            had = bool(self._records)
            self._reset(identity)
        if st.st_size == self._offset:
            return restart and had
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except OSError:
            return False
        self.bytes_read += len(data)
        end = _complete_end(data)
        if end <= 0:
            return False
        chunk = data[:end]
        if self._offset == 0 and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
        self._offset += end
        records = list(csv.reader(io.StringIO(chunk.decode("utf-8", errors="replace"),
                                              newline="")))
        if self._header is None:
            if not records:
                return False
            self._header, records = records[0], records[1:]
        header = self._header
        self.rows_parsed += len(records)
        if "campaign_id" not in header:
            return restart
        at = header.index("campaign_id")
        mine = [r for r in records if len(r) == len(header) and r[at] == self.campaign]
        if not mine:
            return restart
        if not _plainly_possible(mine, header):  # the rule and its note: pandas
            self.checked_by_pandas += len(mine)
            self._fast = False  # what pandas kept may be no plain number (" 2"): its way
            frame = pd.DataFrame(mine, columns=header, dtype=str)
            frame, _ = _drop_impossible(frame, self.path, GROUPS_FILE, self.notes)
            mine = frame.to_numpy(str).tolist()
        if mine:
            status = header.index("status") if "status" in header else -1
            self._fast = self._fast and status >= 0 and all(r[status] == "ok" for r in mine)
            self._records += mine
            self._runs = None
        return bool(mine) or restart

    def runs(self) -> Runs:
        """The campaign's rows read so far, normalised (:class:`~engine.results.load.Runs`,
        no job rows); an empty frame before any."""
        if self._runs is None:
            template = self._template()
            if self._fast:  # each row normalised once, in Python (:func:`_normalised_ok`)
                self.plain_rows()
                types = template.groups.dtypes.drop("row")
                groups = pd.DataFrame(self._rows, columns=list(types.index)).astype(
                    types.to_dict())
                groups["row"] = np.arange(len(groups))  # the position among all (load order)
                groups = groups[list(template.groups.columns)]
                self._runs = Runs(groups, template.jobs, [self.path])
            else:  # an unfinished row's fills read the others: all at once, with pandas
                self.rows_normalised += len(self._records)
                groups = pd.DataFrame(self._records, columns=self._header or [], dtype=str)
                self._runs = runs_from_frames(groups.assign(source=str(self.path)), None,
                                              [self.path])
        return self._runs

    def any_value(self, column: str) -> bool:
        """Whether a row of the campaign read so far has a value in ``column`` (``False``
        when the file has no such column): a stream campaign's rows carry
        ``stream_sha256``."""
        header = self._header or []
        if column not in header:
            return False
        at = header.index(column)
        return any(len(r) > at and r[at].strip() for r in self._records)

    def plain_rows(self) -> list[dict[str, Any]] | None:
        """The campaign's rows read so far, each normalised once as :meth:`runs` would
        (:func:`_normalised_ok`: numbers as floats, NaN missing; in load order), while
        every one is ``ok`` with plain numbers; None once one is not (then only
        :meth:`runs` answers). The list is the tail's own: do not change it."""
        if not self._fast:
            return None
        for record in self._records[len(self._rows):]:
            self._rows.append(_normalised_ok(record, self._header or [], str(self.path)))
            self.rows_normalised += 1
        return self._rows

    def _template(self) -> Runs:
        """No rows, normalised by :func:`engine.results.load.runs_from_frames`: the
        columns, their order and their types, once per header."""
        header = tuple(self._header or ())
        if self._empty is None or self._empty[0] != header:
            frame = pd.DataFrame(columns=list(header), dtype=str)
            self._empty = (header, runs_from_frames(frame.assign(source=""), None,
                                                    [self.path]))
        return self._empty[1]


def _normalised_ok(record: list[str], header: list[str], source: str) -> dict[str, Any]:
    """One record (``ok``, its numbers plain: :func:`_plainly_possible`) as
    :func:`engine.results.load.runs_from_frames` normalises it, without pandas (its fixed
    cost, ~20 ms a call, was most of the strip's work per cell end): the text columns as
    text (``""`` where the file lacks one), the numbers as floats (NaN: empty), a
    ``compile_mode`` (``on``/``off`` from ``compile`` where empty), ``compiled``,
    ``machine``, ``precision`` and the harness's unmeasured ``0`` energy as NaN. The fills
    of an unfinished row do not apply (every row is ok). Pinned against a whole load by
    the tests."""
    row: dict[str, Any] = dict(zip(header, record, strict=True))
    row["source"] = source
    for column in text_columns(GROUPS_FILE):
        row.setdefault(column, "")
    if not row["compile_mode"]:
        row["compile_mode"] = "on" if row["compile"].lower() == "true" else "off"
    row["compiled"] = row["compile_mode"] != "off"
    cores = row.get("cpu_cores", "")
    row["machine"] = row["host"] or (f"{row['cpu_model']} ({cores} cores)"
                                     if row["cpu_model"] or cores else "unknown machine")
    if not row["precision"]:
        row["precision"] = "amp-fp16" if row["amp"].lower() == "true" else "fp32"
    for column in numeric_columns(GROUPS_FILE):
        text = row.get(column, "")
        row[column] = float(text) if text else math.nan
    if row["energy_group"] == 0 and not row["energy_method"] and not row["gpu_name"]:
        row["energy_group"] = math.nan
    return row


@cache
def _ranges(header: tuple[str, ...]) -> tuple[tuple[int, float, float], ...]:
    """Each number column of ``header`` as (position, low, high)."""
    return tuple((header.index(c), *value_range(c)) for c in numeric_columns(GROUPS_FILE)
                 if c in header)


def _plainly_possible(records: list[list[str]], header: list[str]) -> bool:
    """Whether every number of ``records`` is empty or a plain decimal (:data:`_PLAIN`)
    within its column's range (:func:`engine.results.values.value_range`): then
    :func:`engine.results.load._drop_impossible` keeps them all (it parses such a text to
    the same float). False when one is anything else: pandas decides then."""
    ranges = _ranges(tuple(header))
    for record in records:
        for at, low, high in ranges:
            text = record[at]
            if not text:
                continue
            if _PLAIN.fullmatch(text) is None:
                return False
            value = float(text)
            if not (math.isfinite(value) and low <= value <= high):
                return False
    return True


def _complete_end(data: bytes) -> int:
    """The length of ``data``'s longest prefix of complete records: up to a line end with
    the quotes before it balanced (a quoted value may hold a line end); 0 when none."""
    end = data.rfind(b"\n")
    while end >= 0 and data.count(b'"', 0, end + 1) % 2:
        end = data.rfind(b"\n", 0, end)
    return end + 1
