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
value left out too. :meth:`GroupTail.runs` normalises them with
:func:`engine.results.load.runs_from_frames` (no job rows: the strip's speedups need none).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pandas as pd

from engine.results.columns import GROUPS_FILE
from engine.results.load import Runs, _drop_impossible, runs_from_frames


class GroupTail:
    """The group rows of campaign ``campaign`` in the group file ``path`` (a runs folder's
    ``master_groups.csv``), read up to the last complete record at each :meth:`update`.

    ``bytes_read`` and ``rows_parsed`` count what all updates read and parsed (every
    campaign's rows parsed, its own kept): they tell a test that an update reads only what
    was appended since the last one.
    """

    def __init__(self, path: str | os.PathLike[str], campaign: str) -> None:
        self.path = Path(path)
        self.campaign = campaign
        self.bytes_read = 0
        self.rows_parsed = 0
        self.notes: list[str] = []
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._identity = identity
        self._offset = 0
        self._header: list[str] | None = None
        self._records: list[list[str]] = []
        self._runs: Runs | None = None

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
        frame = pd.DataFrame(mine, columns=header, dtype=str)
        frame, _ = _drop_impossible(frame, self.path, GROUPS_FILE, self.notes)
        if len(frame):
            # kept as plain records: one frame built per answer, never a concat of many
            self._records += frame.to_numpy(str).tolist()
            self._runs = None
        return bool(len(frame)) or restart

    def runs(self) -> Runs:
        """The campaign's rows read so far, normalised (:class:`~engine.results.load.Runs`,
        no job rows); an empty frame before any."""
        if self._runs is None:
            groups = pd.DataFrame(self._records, columns=self._header or [], dtype=str)
            self._runs = runs_from_frames(groups.assign(source=str(self.path)), None,
                                          [self.path])
        return self._runs


def _complete_end(data: bytes) -> int:
    """The length of ``data``'s longest prefix of complete records: up to a line end with
    the quotes before it balanced (a quoted value may hold a line end); 0 when none."""
    end = data.rfind(b"\n")
    while end >= 0 and data.count(b'"', 0, end + 1) % 2:
        end = data.rfind(b"\n", 0, end)
    return end + 1
