"""``fugue-tui --batch CAMPAIGN --json``: a live campaign as a stream of JSON lines on
stdout (issue 29), for programs that follow a run (a CI job, a lab's scheduler).

One JSON object per line (schema ``fugue-tui/batch``, ``fugue_tui/schemas/batch.v1.json``,
docs/json.md), each with ``"schema"``, ``"version"`` and ``"kind"``:

``event``
    every event of the campaign as the runner and its cells wrote it (docs/events.md), in
    the order the front ends see them (``engine.observe.follow``), under ``"event"``.
``row``
    each result row this run appended (``"file"``: ``master_groups.csv`` or
    ``master_individual.csv``), typed from the column registry
    (:mod:`engine.results.columns`): numbers as numbers (counts as integers), flags as
    booleans, JSON columns parsed, ``timestamp`` in ISO 8601, missing as ``null``. A group
    row comes once it is on disk and its cell's ``summary`` event has been written (a cell
    appends its rows just before that event: holding the row until then gives one order
    to rely on, summary then row), its job rows with it or after; at the end of the run
    every row of the run still held is written.
``summary``
    the last line: the exit status, the campaign, and its report's ``cells`` (as in
    ``report --json``) and ``problems`` (this run's cells whose last attempt was not ok).

Stdout carries nothing else: the runner's and the cells' stdout go to stderr, warnings and
the closing problem lines stay on stderr, the human progress and report are not printed.
The exit status is the text form's. Rows are read back from the results files (not
rebuilt from events) so that a line says exactly what is on disk.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from engine.event_base import Event
from engine.events import is_runner_event
from engine.results.columns import (
    BOOL,
    COLUMNS,
    GROUPS_FILE,
    INDIVIDUAL_FILE,
    JSON,
    NUMBER,
)
from engine.results.values import row_instant, since_instant
from fugue_tui.jsonout import SCHEMA_VERSION, clean
from fugue_tui.live.event_text import warning_line

#: The stream's schema name (``fugue_tui/schemas/batch.v1.json``).
KIND = "batch"


def write_line(kind: str, stream=None, **body: Any) -> None:
    """One line of the stream: ``{"schema", "version", "kind", **body}``, compact, flushed
    (a follower reads each line as it comes)."""
    stream = stream or sys.stdout
    doc = {"schema": f"fugue-tui/{KIND}", "version": SCHEMA_VERSION, "kind": kind,
           **clean(body)}
    stream.write(json.dumps(doc, allow_nan=False, ensure_ascii=False,
                            separators=(",", ":")) + "\n")
    stream.flush()


def typed_row(row: dict[str, str], file: str) -> dict[str, Any]:
    """A results-file row (text, as :func:`engine.results.read.read_rows` gives it) with the
    registry's types; empty is ``None``, never 0 or ``""``."""
    from fugue_tui.report.export_data import INTEGER_COLUMNS

    kinds = {c.name: c.kind for c in COLUMNS if c.file == file}
    out: dict[str, Any] = {}
    for name, text in row.items():
        if text is None or text == "":
            out[name] = None
            continue
        kind = kinds.get(name)
        if name == "timestamp" and len(text) == 15 and text[8] == "_":
            out[name] = (f"{text[0:4]}-{text[4:6]}-{text[6:8]}T"
                         f"{text[9:11]}:{text[11:13]}:{text[13:15]}")
        elif kind == NUMBER:
            try:
                number = float(text)
            except ValueError:  # a hand-edited cell: kept as the text it is
                out[name] = text
                continue
            if not math.isfinite(number):
                out[name] = None
            elif name in INTEGER_COLUMNS and number.is_integer():
                out[name] = int(number)
            else:
                out[name] = number
        elif kind == BOOL:
            out[name] = {"true": True, "1": True, "false": False, "0": False}.get(
                text.strip().lower(), text)
        elif kind == JSON:
            try:
                out[name] = json.loads(text)
            except ValueError:
                out[name] = text
        else:
            out[name] = text
    return out


class JsonProgress:
    """The progress consumer of ``--batch --json`` (the same interface as
    :class:`fugue_tui.console.plain.PlainProgress`): each event as an ``event`` line, each warning
    also on stderr for a person watching, and after each poll the rows this run appended
    (``row`` lines; :meth:`rows`)."""

    def __init__(self, runs_dir: Path, campaign_id: str, since: str, stream=None):
        self.stream = stream or sys.stdout
        self.runs_dir = Path(runs_dir)
        self.campaign_id = campaign_id
        self.since = since
        self.since_s = since_instant(since)  # rows compared as instants, never as text
        self.labels: dict[str, str] = {}
        #: Group ids of this run's group rows already written, and the job rows written.
        self.groups: set[str] = set()
        self.jobs: set[tuple[str, str]] = set()
        #: Group ids whose cell's summary event has been written (their rows may follow).
        self.summarised: set[str] = set()
        self._final = False
        self._sizes: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        if is_runner_event(event) and event.get("label") and event.get("cell"):
            self.labels[event["cell"]] = event["label"]
        try:
            warning = warning_line(event, self.labels.get(event.get("cell") or "", ""))
        except (KeyError, TypeError, ValueError):
            warning = None
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
        write_line("event", self.stream, event=event)
        if event.get("type") == "summary" and event.get("group_id"):
            self.summarised.add(str(event["group_id"]))
            self._sizes.pop(GROUPS_FILE, None)  # a held row may now be written: read again

    def tick(self) -> None:
        """After each poll: the rows appended since (a stat per file when nothing changed)."""
        self.rows()

    def _changed(self, name: str) -> bool:
        try:
            size = (self.runs_dir / name).stat().st_size
        except FileNotFoundError:
            return False
        if self._sizes.get(name) == size:
            return False
        self._sizes[name] = size
        return True

    def rows(self) -> None:
        """Write this run's new group rows (campaign ``campaign_id``, stamped at or after
        ``since``) whose summary event has been written (all of them at the end), then
        the job rows of every group written so far, each once."""
        from engine.results.read import read_rows

        groups_changed = self._changed(GROUPS_FILE)
        jobs_changed = self._changed(INDIVIDUAL_FILE)
        if groups_changed:
            for row in read_rows(self.runs_dir / GROUPS_FILE):
                gid = row.get("group_id") or ""
                if (row.get("campaign_id") != self.campaign_id or gid in self.groups
                        or (row_instant(row) or float("-inf")) < self.since_s):
                    continue
                if not self._final and gid not in self.summarised:
                    continue  # held until its summary event (which makes the file read again)
                self.groups.add(gid)
                write_line("row", self.stream, file=GROUPS_FILE,
                           row=typed_row(row, GROUPS_FILE))
                jobs_changed = True  # its job rows may already be on disk
        if jobs_changed and self.groups:
            for row in read_rows(self.runs_dir / INDIVIDUAL_FILE):
                # a group id is new for every attempt: with the job id it names one row
                key = (row.get("group_id") or "", row.get("job_id") or "")
                if key[0] not in self.groups or key in self.jobs:
                    continue
                self.jobs.add(key)
                write_line("row", self.stream, file=INDIVIDUAL_FILE,
                           row=typed_row(row, INDIVIDUAL_FILE))

    def __enter__(self) -> JsonProgress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._final = True  # a cell killed between its rows and its summary: rows all the same
        self._sizes.clear()
        self.rows()  # whatever the last poll did not see


def write_summary(exit_code: int, runner: Any, problems: list[dict[str, Any]],
                  stream=None) -> None:
    """The stream's last line: the exit status, the campaign's identity and folders, its
    report's cells (:func:`fugue_tui.jsonout.report_cells` over this campaign's rows; ``[]``
    when it has none), a stream campaign's ``streams`` (as ``report --json``'s; absent
    otherwise) and ``problems``."""
    from engine.errors import FugueError
    from engine.results.stream_report import stream_cells
    from fugue_tui.jsonout import report_cells
    from fugue_tui.report.tables import select_runs

    streams: list[dict[str, Any]] = []
    try:
        runs = select_runs(runner.runs_dir, runner.campaign_id)
        cells = report_cells(runs)
        streams = stream_cells(runs.groups)  # a stream campaign's comparison (issue 51)
    except FugueError:  # no rows of this campaign (all skipped or reused) or no file
        cells = []
    write_line("summary", stream, exit_code=int(exit_code), campaign=runner.campaign_id,
               runs_dir=str(runner.runs_dir), run_dir=str(runner.run_dir),
               cells=cells, **({"streams": streams} if streams else {}), problems=problems)
