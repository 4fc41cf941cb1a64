"""The plain progress of ``fugue-tui --batch``: when stdout is not a terminal (a log, a
pipe, CI), or ``FUGUE_PLAIN`` asks for it, one short line per lifecycle event and per job
epoch instead of the live view (``-q``: the cells' lines only, :data:`QUIET_DROPPED`), each
warning on stderr as it comes. The lines are the
:attr:`~fugue_tui.live.event_text.Form.PLAIN` texts of
:func:`fugue_tui.live.event_text.event_text`; this module decides only when each is
printed (a control command's skip of a queued cell waits for its turn)."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from engine.event_base import Event
from engine.event_types import (
    RunnerCampaignAborted,
    RunnerCampaignDone,
    RunnerCellStarted,
    RunnerSkipped,
)
from engine.events import is_runner_event, parse_event
from fugue_tui.live.event_text import (
    INDENT,
    Form,
    NamedCell,
    event_text,
    not_shown,
    warning_line,
)

#: The cell events ``-q`` leaves out: per job and per phase (the quick campaign's 1,768
#: piped lines were mostly these); the cell's summary and its end stay, as do the runner's
#: lines (each cell's start, end, skip, retry) and every warning (stderr).
QUIET_DROPPED = frozenset({"started", "phase", "executor", "job_started", "job_progress",
                           "job_done"})


def plain_requested(environ: dict[str, str] | None = None) -> bool:
    """``FUGUE_PLAIN`` set to anything but "" or "0" asks for the plain lines."""
    value = (os.environ if environ is None else environ).get("FUGUE_PLAIN", "")
    return value.strip() not in ("", "0")


class PlainProgress:
    """Event consumer writing short lines (one per lifecycle event and epoch end) to
    ``stream``, and each ``warning`` event (a cell's or the runner's) to stderr as it comes
    (:func:`fugue_tui.live.event_text.warning_line`)."""

    def __init__(self, total: int, stream: TextIO | None = None, quiet: bool = False):
        self.total = total
        #: ``-q``: the cell events of :data:`QUIET_DROPPED` print nothing.
        self.quiet = quiet
        self.stream = stream or sys.stdout
        #: Cell labels by key, from the runner's events (a cell's warning names its cell).
        self.labels: dict[str, str] = {}
        #: Campaign indices by cell key (a control line names the cell as [i/N]).
        self.indices: dict[str, int] = {}
        #: The index of the cell started last (0: none yet).
        self.current = 0
        #: "[i/N] ...: skipped" lines of queued cells skipped by a control command, held
        #: until their turn (index order), so that [5/6] does not come before [4/6].
        self.held: dict[int, str] = {}

    def __call__(self, event: Event) -> None:
        try:
            event = parse_event(event)  # a JSON document (a test's) is read as its event
            if is_runner_event(event) and event.get("label") and event.get("cell"):
                self.labels[event["cell"]] = event["label"]
            if is_runner_event(event) and event.get("cell") and isinstance(
                    event.get("index"), int):
                self.indices[event["cell"]] = event["index"]
            warning = warning_line(event, self.labels.get(event.get("cell") or "", ""))
            line = self.line(event) if warning is None else None
            line = self._in_order(event, line)
        except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop a campaign
            warning = None
            line = INDENT + not_shown(event, exc)
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
        if line is not None:
            print(line, file=self.stream, flush=True)

    def line(self, event: Event) -> str | None:
        """The plain text of ``event`` (several lines joined), None when it says nothing."""
        if self.quiet and not is_runner_event(event) and event.get("type") in QUIET_DROPPED:
            return None
        key = event.get("cell")
        cell = NamedCell(self.labels.get(key, ""), self.indices.get(key)) if key else None
        lines = event_text(event, Form.PLAIN, cell, self.total)
        return "\n".join(lines) if lines else None

    def tick(self) -> None:
        """Nothing to redraw: lines are printed as events arrive."""

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._flush(None)  # a campaign stopped early still says what was skipped
        return None

    def _in_order(self, event: Event, line: str | None) -> str | None:
        """Hold a control skip of a queued cell until the cells before it started; print
        what is held before the next cell's start line and at the campaign's end."""
        if not is_runner_event(event):
            return line
        index = event.get("index")
        if (isinstance(event, RunnerSkipped) and line is not None and isinstance(index, int)
                and index > self.current + 1
                and "control command" in str(event.get("reason") or "")):
            self.held[index] = line
            return None
        if isinstance(event, RunnerCellStarted) and isinstance(index, int):
            self.current = max(self.current, index)
            self._flush(index)
        elif isinstance(event, RunnerCampaignDone | RunnerCampaignAborted):
            self._flush(None)
        return line

    def _flush(self, before: int | None) -> None:
        """Print the held lines of cells before index ``before`` (None: all), in order."""
        for index in sorted(i for i in self.held if before is None or i < before):
            print(self.held.pop(index), file=self.stream, flush=True)
