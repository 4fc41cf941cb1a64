"""The live display of a running campaign, shared by the terminal's live view
(``fugue-tui --batch`` on a terminal: :mod:`fugue_tui.console.live`) and the dashboard's
run screen and panes.

:class:`LiveView` applies the event stream to an :class:`engine.observe.state.CampaignState`
(the one reducer every front end shares) and keeps only its display log: the recent
lifecycle lines, as text (:func:`fugue_tui.live.event_text.event_text`, form
:attr:`~fugue_tui.live.event_text.Form.RECENT`). It shows:

- the campaign: cells done/total and the counts by outcome (ok, failed, killed, skipped);
- the current cell: label, attempt, elapsed time and state (running, suspect, hung, with
  what the watchdog saw), its warnings as they came;
- one bar per job of the current cell (:mod:`fugue_tui.live.job_table`);
- the last few lifecycle lines (killed, retried, skipped, suspect, hung, failed, control,
  warnings).

Times come from the events' own ``ts`` (wall clock, written by the runner and the cells)
and an injected ``clock``: a view replayed from files shows the same numbers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from engine.event_base import Event
from engine.observe.state import CampaignState, CellState
from fugue_tui.format import fmt_duration
from fugue_tui.live.event_text import Form, event_text
from fugue_tui.live.job_table import job_rows
from fugue_tui.live.styles import BAR_WIDTH, STAGE_WORDS, STATE_STYLE, shown_state

#: Lifecycle lines kept under the view.
RECENT = 5
#: Job rows shown for the current cell; the rest are summarised on one line.
MAX_JOBS = 12
#: How the campaign's counts are styled when not zero.
_COUNT_STYLE = {"ok": "green", "failed": "red", "killed": "red", "skipped": "yellow"}


class LiveView:
    """The live display of a :class:`CampaignState` (:meth:`render`), with its log of recent
    lifecycle lines (:attr:`recent`, text only: the state is the one reducer).

    ``total``: the campaign's cell count (known before the runner starts). ``clock``: wall
    clock seconds, as in the events' ``ts`` (injected by tests).
    """

    def __init__(self, total: int, clock: Callable[[], float] = time.time,
                 recent: int = RECENT, max_jobs: int = MAX_JOBS):
        self.total = total
        self.clock = clock
        self.max_jobs = max_jobs
        self.state = CampaignState()
        self.recent: deque[str] = deque(maxlen=recent)

    # -- events ---------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Apply ``event`` to the state, then log its recent lines (if any). Raises what
        the state or the text raise for a malformed event (the caller shows a line)."""
        self.state.apply(event)
        for line in event_text(event, Form.RECENT, self.cell_of(event)):
            self.note(event.get("ts"), line)

    def cell_of(self, event: Event) -> CellState | None:
        """The cell ``event`` names, if the state knows it."""
        key = event.get("cell")
        return self.state.cells.get(key) if key is not None else None

    def note(self, ts: float | None, line: str) -> None:
        """Add ``line`` to the recent lines, stamped with ``ts`` (local time)."""
        stamp = time.strftime("%H:%M:%S", time.localtime(ts)) if ts is not None else "--:--:--"
        self.recent.append(f"{stamp} {line}")

    # -- rendering ------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        counts = self.state.counts()
        return {"ok": counts.get("done", 0), "failed": counts.get("failed", 0),
                "killed": counts.get("killed", 0), "skipped": counts.get("skipped", 0)}

    def render(self) -> RenderableType:
        now = self.clock()
        parts: list[RenderableType] = [self._header(now)]
        current = self.state.current
        cell = self.state.cells.get(current) if current else None
        if cell is not None and not cell.active:  # several devices: another may still run
            cell = next((c for c in self.state.cells.values() if c.active), cell)
        if cell is not None and cell.active:
            parts.append(self.cell_line(cell, now))
            parts.append(self.job_rows(cell, now))
            for warning in cell.warnings:
                parts.append(Text(f"  warning: {warning}", style="yellow"))
            parts.extend(self.other_running(cell, now))
        elif cell is not None:
            line = Text(f"last cell [{cell.index}/{self.total}] {cell.label}: ")
            line.append(shown_state(cell.state), style=STATE_STYLE.get(cell.state, ""))
            if cell.T_group is not None:
                line.append(f", T_group {cell.T_group:.2f} s")
            parts.append(line)
        if self.recent:
            parts.append(Text("recent:", style="bold"))
            parts.extend(Text(f"  {line}", no_wrap=True, overflow="ellipsis")
                         for line in self.recent)
        return Group(*parts)

    def other_running(self, shown: CellState, now: float) -> list[Text]:
        """A multi-device campaign runs a cell per device at once: one line for each
        running cell besides ``shown`` (the newest, whose jobs are drawn), with its device."""
        out = []
        for cell in self.state.cells.values():
            if cell.active and cell.key != shown.key:
                out.append(self.cell_line(cell, now))
        return out

    def _header(self, now: float) -> RenderableType:
        counts = self.counts()
        done = sum(counts.values())
        head = Text("campaign ")
        head.append(self.state.campaign or "?", style="bold")
        if self.state.device:
            head.append(f" · {self.state.device}")
        started, ended = self.state.started_ts, self.state.ended_ts
        end = ended if ended is not None else now
        elapsed = end - started if started is not None else None
        head.append(f" · elapsed {fmt_duration(elapsed)}")  # the cell line's is "cell 0:15"
        if self.state.state not in ("running", "starting"):
            head.append(f" · {self.state.state}", style="bold")
        cells = Text(f"cells {done}/{self.total} done: ")
        for i, (label, n) in enumerate(counts.items()):
            if i:
                cells.append(", ")
            cells.append(f"{n} {label}", style=_COUNT_STYLE[label] if n else "")
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, width=BAR_WIDTH)
        grid.add_column()
        grid.add_row(ProgressBar(total=max(self.total, 1), completed=done, width=BAR_WIDTH),
                     cells)
        return Group(head, grid)

    def cell_line(self, cell: CellState, now: float) -> Text:
        """The cell's line: index, label, attempt, its attempt's elapsed time (``cell 0:15``,
        told apart from the campaign's ``elapsed``), state, stage, watchdog."""
        # a cell that ended took until its end, however late it is looked at
        end = cell.ended_ts if cell.ended_ts is not None and not cell.active else now
        elapsed = end - cell.started_ts if cell.started_ts is not None else None
        line = Text(f"[{cell.index}/{self.total}] ", style="bold")
        line.append(cell.label, style="bold")
        # labelled: the header's clock is the campaign's (issue 47, item 8)
        line.append(f" · attempt {cell.attempt} · cell {fmt_duration(elapsed)} · ")
        line.append(cell.state, style=STATE_STYLE.get(cell.state, ""))
        stage = STAGE_WORDS.get(cell.stage, cell.stage)
        if cell.state == "running" and stage:
            line.append(f" · {stage}")
        if cell.watchdog and cell.state in ("suspect", "hung"):
            line.append(f" ({cell.watchdog})")
        if cell.device and cell.active:  # a multi-device campaign: where it runs
            line.append(f" · {cell.device}", style="dim")
        return line

    def job_rows(self, cell: CellState, now: float) -> Group:
        """One row per job of ``cell``, at most ``max_jobs`` (:func:`job_table.job_rows`);
        the job's latest report is extrapolated while its cell is the runner's latest."""
        return job_rows(cell, now, self.max_jobs, extrapolate=cell.key == self.state.current)
