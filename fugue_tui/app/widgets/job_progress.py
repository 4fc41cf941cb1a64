"""The selected cell's line (label, attempt, elapsed, state, phase, what the watchdog saw)
and one row per job: epoch/step, a bar, loss, val acc, samples/s, elapsed, ETA.

Rendering is :class:`fugue_tui.live.view.LiveView`'s, the same as ``--batch``'s live view; the
widget redraws only when what it shows changed (to the second). The job table fits itself
to the width by measuring (costly), so the pane renders it once per change into plain styled
lines (:func:`prerender`), which Textual then lays out and paints without measuring again;
a layout pass is requested only when the number of lines changed.
"""

from __future__ import annotations

import time
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.observe.state import CellState
from fugue_tui.app.actions import SCROLL_NAV, bindings
from fugue_tui.app.models.cells import NOT_RUN, not_run_reason
from fugue_tui.live.job_table import JobTable
from fugue_tui.live.view import LiveView

#: Seconds between two redraws for new progress of the same cell attempt.
MIN_REDRAW_S = 1.0
#: Column choices kept (by width, headers and the values' widths), at most.
MAX_FITS = 32


def job_signature(view: LiveView, cell: CellState | None, now: float) -> Any:
    """What the job pane depends on: changes when any number it shows could change."""
    if cell is None:
        return None
    jobs = tuple((j.job_id, j.status, j.epoch, j.step, j.loss, j.val_acc, j.train_sps)
                 for j in cell.jobs.values())
    active = cell.active
    return (cell.key, cell.state, cell.attempt, cell.phase, cell.watchdog, jobs,
            tuple(cell.planned_jobs), tuple(cell.warnings), int(now) if active else None,
            view.state.state)  # an aborted campaign's queued cell: "not run"


def prerender(console: Console, renderable: RenderableType, width: int) -> Text:
    """``renderable`` laid out at ``width`` columns, as styled text lines."""
    options = console.options.update(width=width, max_width=width, height=None)
    out = Text(no_wrap=True, overflow="crop", end="")
    lines = console.render_lines(renderable, options, pad=False)
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        for segment in line:
            if not segment.control:
                out.append(segment.text, segment.style)
    out.rstrip()
    return out


def _widths(table: JobTable) -> tuple[int, ...]:
    """The widest value of each of ``table``'s columns, in characters (a bar: 0)."""
    return tuple(max((cell_len(v.plain) for row in table.rows
                      if isinstance(v := row.get(name), Text)), default=0)
                 for name in table.COLUMNS)


def fit_line(line: Text, width: int) -> Text:
    """The cell line in one line of ``width`` columns (0: not laid out, as it is): without
    its `` · attempt N`` when that is what does not fit (the first attempt's, mostly: the
    cell table has a column for it), and never wrapped (issue 47, item 5: at 80 columns the
    stage went to a second line, pushing a job row out)."""
    if width and cell_len(line.plain) > width:
        start = line.plain.find(" · attempt ")
        if start >= 0:
            end = line.plain.find(" · ", start + 3)
            line = line[:start] + line[end:] if end >= 0 else line
        line.no_wrap, line.overflow = True, "ellipsis"
    return line


class JobProgress(Static):
    """Per-job progress of one cell."""

    def __init__(self, **kwargs) -> None:
        super().__init__("no cell selected", **kwargs)
        self._signature: Any = object()
        self._lines = 1
        #: The styled lines shown (None: a renderable Textual measures).
        self._text: Text | None = None
        self._last_draw = float("-inf")
        self._columns: dict[Any, tuple[str, ...]] = {}
        #: Redraws done (the CPU benchmark and tests read it).
        self.draws = 0
        #: Column choices measured (tests read it).
        self.fits = 0
        #: True while a change is held back by the redraw rate limit: the caller must ask
        #: again (a later tick), or the pane would keep showing the older numbers for good
        #: once the campaign goes quiet (the last progress of a fast cell).
        self.deferred = False

    def _fitted(self, jobs: Group) -> Group:
        """``jobs`` with its job table's columns chosen once per width, headers, job count
        and values' widths (the table's own fitting measures it up to five times on every
        draw)."""
        from rich.measure import Measurement

        width = self.size.width
        table = jobs.renderables[0] if jobs.renderables else None
        if width < 20 or not isinstance(table, JobTable) or not self.is_mounted:
            return jobs
        # and the values' widths: columns chosen while the jobs waited ("–" everywhere)
        # were kept once numbers came, and the table, too wide, squeezed loss and ETA to
        # "…" with room left (issue 47, item 10, a hpo cell at 160x48). What fits depends
        # on the width, the headers and the widest value of each column only, not on the
        # cell: the choices are kept across cells (a campaign's cells repeat a few shapes;
        # choosing cost up to five table measurements at each new cell, issue 47, item 2)
        key = (width, table.val_header, len(table.rows), _widths(table))
        columns = self._columns.get(key)
        if columns is None:
            console = self.app.console
            wide = console.options.update(width=10_000)
            columns = table.COLUMNS
            for drop in (None, *table.DROP):
                if drop is not None:
                    columns = tuple(c for c in columns if c != drop)
                if Measurement.get(console, wide, table.table(columns)).maximum <= width:
                    break
            if len(self._columns) >= MAX_FITS:
                self._columns.clear()  # bounded: a long campaign's widths keep coming
            self._columns[key] = columns
            self.fits += 1
        return Group(table.table(columns), *jobs.renderables[1:])

    def on_resize(self) -> None:
        self._signature = object()  # lay the table out again at the new width
        self._text = None

    def _put(self, content: RenderableType) -> None:
        if isinstance(content, Text):
            if content == self._text:
                return  # new numbers that read the same (a rate, a loss to 4 digits)
            lines = content.plain.count("\n") + 1
        else:
            lines = -1
        self._text = content if isinstance(content, Text) else None
        self.update(content, layout=lines != self._lines or lines < 0)
        self._lines = lines
        self.draws += 1

    def show(self, view: LiveView, cell: CellState | None, now: float) -> bool:
        """Redraw for ``cell`` if anything shown changed; True when it rebuilt the lines
        (repainted only when their text changed: :attr:`draws` counts those). New numbers
        of the same cell attempt are drawn at most every :data:`MIN_REDRAW_S`."""
        signature = job_signature(view, cell, now)
        if signature == self._signature:
            self.deferred = False
            return False
        mono = time.monotonic()
        same = (isinstance(self._signature, tuple) and signature is not None
                and signature[:3] == self._signature[:3])
        if same and mono - self._last_draw < MIN_REDRAW_S:
            self.deferred = True
            return False  # the same cell's progress: wait for the next slot
        self.deferred = False
        self._last_draw = mono
        self._signature = signature
        if cell is None:
            self._put(Text("no cell selected", style="dim"))
            return True
        stopped = not_run_reason(cell, view.state.state)
        if cell.state == "queued":  # never started: no attempt, no time ("attempt 0 · –")
            parts: list[Any] = [Text.assemble(
                (f"[{cell.index}/{view.total}] ", "bold"), (cell.label, "bold"), " · ",
                (NOT_RUN, "yellow") if stopped else ("queued", "dim"))]
        else:
            parts = [fit_line(view.cell_line(cell, now), self.size.width)]  # the live view's
        if cell.planned_jobs or cell.jobs:
            parts.append(self._fitted(view.job_rows(cell, now)))
        elif stopped:
            parts.append(Text(f"  not run: {stopped} before this cell started", style="dim"))
        elif cell.state == "queued":
            parts.append(Text("  queued: jobs appear when the cell starts", style="dim"))
        elif cell.error:
            parts.append(Text(f"  {cell.error}", style="dim"))
        for warning in cell.warnings:  # one row each, as in the events pane (zoom: whole)
            parts.append(Text(f"  warning: {warning}", style="yellow", no_wrap=True,
                              overflow="ellipsis"))
        width = self.size.width
        if width >= 20 and self.is_mounted:
            self._put(prerender(self.app.console, Group(*parts), width))
        else:  # not laid out yet: let Textual measure it once
            self._put(Group(*parts))
        return True


class JobsPane(VerticalScroll):
    """The job pane's scroll box (``#jobs-pane``): j/k/g/G scroll it (zoomed to, it has
    the keys)."""

    BINDINGS = bindings(SCROLL_NAV)
