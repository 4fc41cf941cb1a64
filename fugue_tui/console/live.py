"""The live view of a campaign: the terminal view of ``fugue-tui --batch`` (stdout a
terminal, ``FUGUE_PLAIN`` unset), whose :class:`LiveView` and styles the dashboard's run
screen and panes reuse.

One event stream, two renderers: :class:`LiveProgress` takes the same events as
:class:`fugue_tui.console.batch.PlainProgress` (from :class:`engine.observe.follow.CampaignFollower`) and
applies them to an :class:`engine.observe.state.CampaignState`, the one reducer every front
end shares; :class:`LiveView` renders from it and keeps only its display log (the recent
lifecycle lines, as text). The view shows:

- the campaign: cells done/total and the counts by outcome (ok, failed, killed, skipped);
- the current cell: label, attempt, elapsed time and state (running, suspect, hung, with
  what the watchdog saw), its warnings as they came (the executor's ``warning`` events, a
  results file repaired, the summary's: host busy);
- one bar per job of the current cell: completed fraction of epochs × steps, loss, val acc
  when known, samples/s, elapsed and ETA from the job's own rate
  (:func:`fugue_tui.console.progress_math.eta_seconds`);
- the last few lifecycle lines (killed, retried, skipped, suspect, hung, failed, control,
  warnings).

Warnings also go to stderr, one line each as they come (:func:`warning_line`): above the
live view, and kept in the terminal after it.

Rendering is single-threaded (no Rich refresh thread): the follow loop calls
:meth:`LiveProgress.tick` between polls and the display is redrawn at most every
:data:`REFRESH_S` seconds, so the state is never read while an event is being applied.
Times come from the events' own ``ts`` (wall clock, written by the runner and the cells)
and an injected ``clock``: a view replayed from files shows the same numbers.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from engine.events import is_runner_event
from engine.observe.state import CampaignState, CellState
from fugue_tui.console.progress_math import eta_seconds, fraction_done
from fugue_tui.format import PENDING as DASH
from fugue_tui.format import fmt_duration, fmt_number, fmt_rate

#: Minimum seconds between two redraws (at most 4 per second).
REFRESH_S = 0.25
#: Lifecycle lines kept under the view.
RECENT = 5
#: Job rows shown for the current cell; the rest are summarised on one line.
MAX_JOBS = 12
#: Width of a job's bar, in characters.
BAR_WIDTH = 20

#: What a cell is doing (its state's ``stage``), in words.
STAGE_WORDS = {"starting": "starting", "setup": "setting up", "training": "training",
               "finishing": "finishing"}
#: How a cell's state is styled (colours vanish under NO_COLOR; the words stay).
STATE_STYLE = {"running": "green", "suspect": "bold yellow", "hung": "bold red",
               "done": "green", "failed": "red", "killed": "red", "skipped": "yellow",
               "queued": "dim"}


# -- the view -----------------------------------------------------------------------------

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
    def apply(self, event: dict[str, Any]) -> None:
        """Apply ``event`` to the state, then log it if it is a lifecycle line."""
        self.state.apply(event)
        kind = event.get("type")
        key = event.get("cell")
        ts = event.get("ts")
        if kind in ("campaign_interrupted", "campaign_aborted"):
            self.note(ts, f"campaign {kind.split('_')[1]}")
        cell = self.state.cells.get(key) if key is not None else None
        if kind == "warning" and is_runner_event(event):  # about a cell or none
            where = f"{cell.label}: " if cell is not None else ""
            self.note(ts, f"{where}warning: {event.get('message', '')}")
            return
        if kind == "control" and is_runner_event(event):  # abort names no cell; a bad ref no key
            how = "applied" if event.get("applied") else f"ignored ({event.get('reason')})"
            what = cell.label if cell is not None else (key or "")
            self.note(ts, " ".join(p for p in ("control", event.get("cmd"), what, how) if p))
            return
        if cell is None:
            if kind == "killed" and event.get("predecessor"):  # before the cells are listed
                self.note(ts, f"cell {str(key)[:8]} (earlier runner): killed, "
                              f"{event.get('reason', '')}")
            return
        if is_runner_event(event):
            self._runner_note(cell, kind, event)
        elif event.get("attempt") == cell.attempt:  # a stale attempt's lines are ignored
            self._cell_note(cell, kind, event)

    def _runner_note(self, cell: CellState, kind: str, event: dict[str, Any]) -> None:
        ts = event.get("ts")
        if kind == "skipped":
            self.note(ts, f"{cell.label}: skipped, {event.get('reason', '')}")
        elif kind in ("suspect", "hung"):
            self.note(ts, f"{cell.label}: {kind}, {event.get('seen', '')}")
        elif kind == "resumed":
            self.note(ts, f"{cell.label}: progressing again")
        elif kind == "retried":
            how = ("manual retry" if event.get("manual")
                   else f"retry {event.get('retry')}/{event.get('retries')}")
            self.note(ts, f"{cell.label}: {how}, attempt {event.get('attempt')} next")
        elif kind == "killed":
            self.note(ts, f"{cell.label}: killed, {event.get('reason', '')}")
        elif kind == "failed":
            self.note(ts, f"{cell.label}: failed, {event.get('error', '')}")
        elif kind == "leftovers_killed":
            self.note(ts, f"{cell.label}: leftover processes killed {event.get('pids')}")

    def _cell_note(self, cell: CellState, kind: str, event: dict[str, Any]) -> None:
        if kind == "warning":
            self.note(event.get("ts"), f"{cell.label}: warning: {event.get('message', '')}")
        elif kind == "summary":
            for warning in event.get("warnings") or []:
                self.note(event.get("ts"), f"{cell.label}: warning: {warning}")

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
            line.append(_shown_state(cell.state), style=STATE_STYLE.get(cell.state, ""))
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
        head.append(f" · {fmt_duration(elapsed)}")
        if self.state.state not in ("running", "starting"):
            head.append(f" · {self.state.state}", style="bold")
        cells = Text(f"cells {done}/{self.total} done: ")
        for i, (label, n) in enumerate(counts.items()):
            if i:
                cells.append(", ")
            style = {"ok": "green", "failed": "red", "killed": "red",
                     "skipped": "yellow"}[label] if n else ""
            cells.append(f"{n} {label}", style=style)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, width=BAR_WIDTH)
        grid.add_column()
        grid.add_row(ProgressBar(total=max(self.total, 1), completed=done, width=BAR_WIDTH),
                     cells)
        return Group(head, grid)

    def cell_line(self, cell: CellState, now: float) -> Text:
        """The cell's line: index, label, attempt, elapsed, state, stage, watchdog."""
        # a cell that ended took until its end, however late it is looked at
        end = cell.ended_ts if cell.ended_ts is not None and not cell.active else now
        elapsed = end - cell.started_ts if cell.started_ts is not None else None
        line = Text(f"[{cell.index}/{self.total}] ", style="bold")
        line.append(cell.label, style="bold")
        line.append(f" · attempt {cell.attempt} · {fmt_duration(elapsed)} · ")
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
        """One row per job of ``cell`` (a :class:`JobTable` first), at most ``max_jobs``."""
        order = list(dict.fromkeys(cell.planned_jobs + list(cell.jobs)))
        shown = order if len(order) <= self.max_jobs else self._pick(cell, order)
        rows: list[RenderableType] = [
            JobTable([self._job_cells(cell, job_id, now) for job_id in shown],
                     val_header(cell.jobs[j].val_metric for j in shown if j in cell.jobs))]
        if len(shown) < len(order):
            finished = sum(1 for j in order if j not in shown and j in cell.jobs
                           and cell.jobs[j].status != "running")
            rows.append(Text(f"  … {len(order) - len(shown)} more jobs ({finished} finished)",
                             style="dim"))
        return Group(*rows)

    def _pick(self, cell: CellState, order: list[str]) -> list[str]:
        """The running jobs first, then the latest finished and the next waiting ones."""
        running = [j for j in order if j in cell.jobs and cell.jobs[j].status == "running"]
        finished = [j for j in order if j in cell.jobs and cell.jobs[j].status != "running"]
        waiting = [j for j in order if j not in cell.jobs]
        picked = running[: self.max_jobs]
        room = self.max_jobs - len(picked)
        latest = finished[-(room // 2 + room % 2):] if room else []
        picked += latest
        picked += waiting[: self.max_jobs - len(picked)]
        return [j for j in order if j in set(picked)]

    def _job_cells(self, cell: CellState, job_id: str, now: float) -> dict[str, RenderableType]:
        job = cell.jobs.get(job_id)
        if job is None:
            row = {name: Text(DASH) for name in JobTable.COLUMNS}
            row.update(job=Text(f"  {job_id}", style="dim"), progress=Text(""),
                       **{"%": Text("waiting", style="dim")})
            return row
        # The job's latest report is extrapolated while its cell is the runner's latest.
        reported = job.reported_ts is not None and cell.key == self.state.current
        last_elapsed = job.reported_elapsed if reported else job.elapsed
        last_ts = job.reported_ts if reported else None
        running = job.status == "running"
        fraction = 1.0 if job.status == "ok" else fraction_done(job.epoch, job.epochs, job.step,
                                                                job.steps)
        elapsed = last_elapsed
        if running and last_ts is not None and cell.active:
            elapsed = (elapsed or 0.0) + max(0.0, now - last_ts)
        if job.status == "failed" or (running and cell.state == "hung"):
            eta = None  # no rate to extrapolate from
        elif running:
            eta = eta_seconds(fraction, last_elapsed, last_ts, now)
        else:
            eta = 0.0
        sps = job.train_sps
        if sps is None and job.samples and job.elapsed:
            sps = job.samples / job.elapsed
        epochs = f"{job.epoch}/{job.epochs}" if job.epochs else DASH
        steps = f"{job.step}/{job.steps}" if job.steps else DASH
        bar: RenderableType = Text("")
        if fraction is not None:
            bar = ProgressBar(total=1.0, completed=fraction, width=BAR_WIDTH,
                              complete_style="red" if job.status == "failed" else "bar.complete")
        pct = Text(f"{fraction:.0%}" if fraction is not None else DASH)
        if job.status == "failed":
            pct = Text("failed", style="red")
        return {"job": Text(f"  {job_id}"), "epoch": Text(epochs), "step": Text(steps),
                "progress": bar, "%": pct, "loss": Text(fmt_number(job.loss, ".4f", DASH)),
                "val acc": Text(fmt_number(job.val_acc, ".3f", DASH)),
                "samples/s": Text(fmt_rate(sps, DASH)),
                "elapsed": Text(fmt_duration(elapsed)), "ETA": Text(fmt_duration(eta))}


#: The job table's header of the validation metric column, by what the events say it holds.
VAL_HEADERS = {"accuracy": "val acc", "r2": "val R²"}


def val_header(metrics) -> str:
    """The header of the ``val acc`` column for jobs whose events said ``metrics`` (None:
    not said, an older recording): "val acc" for classification, "val R²" for regression,
    "val metric" when one cell mixes them."""
    said = {m for m in metrics if m}
    if len(said) == 1:
        metric = said.pop()
        return VAL_HEADERS.get(metric, f"val {metric}")
    return "val metric" if said else "val acc"


class JobTable:
    """The job rows as a table that fits the console: on a narrow one the least needed
    columns go first (step, samples/s, elapsed, val acc), then the job id is shortened.
    The ``val acc`` column (its key) is headed ``val_header``: R² for regression."""

    COLUMNS = ("job", "epoch", "step", "progress", "%", "loss", "val acc", "samples/s",
               "elapsed", "ETA")
    DROP = ("step", "samples/s", "elapsed", "val acc")

    def __init__(self, rows: list[dict[str, RenderableType]], val_header: str = "val acc"):
        self.rows = rows
        self.val_header = val_header

    def table(self, columns: tuple[str, ...]) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False,
                      header_style="dim")
        for name in columns:
            header = {"job": "  job", "%": "", "val acc": self.val_header}.get(name, name)
            table.add_column(header,
                             justify="left" if name in ("job", "progress") else "right",
                             no_wrap=True, overflow="ellipsis",
                             width=BAR_WIDTH if name == "progress" else None,
                             max_width=32 if name == "job" else None)
        for row in self.rows:
            table.add_row(*(row[name] for name in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = self.COLUMNS
        for drop in (None, *self.DROP):
            if drop is not None:
                columns = tuple(c for c in columns if c != drop)
            table = self.table(columns)
            wide = options.update(width=10_000)  # the natural width, not clamped to the console
            if Measurement.get(console, wide, table).maximum <= options.max_width:
                break
        yield table


def _shown_state(state: str) -> str:
    return "ok" if state == "done" else state


def warning_line(event: dict[str, Any], label: str = "") -> str | None:
    """The stderr line of a ``warning`` event (the cell's or the runner's), or None for any
    other event: ``fugue-tui: warning: <cell label>: <message>`` (no label: none known)."""
    if event.get("type") != "warning":
        return None
    where = f"{label}: " if label else ""
    return f"fugue-tui: warning: {where}{event.get('message', '')}"


# -- the consumer -------------------------------------------------------------------------

class LiveProgress:
    """Event consumer with the interface of :class:`fugue_tui.console.batch.PlainProgress`
    (``progress(event)``), plus ``tick()`` (redraw when due) and a context manager that
    starts and stops the Rich live display on ``console``."""

    def __init__(self, total: int, console: Console, clock: Callable[[], float] = time.time,
                 refresh_s: float = REFRESH_S, monotonic: Callable[[], float] = time.monotonic):
        self.view = LiveView(total, clock=clock)
        self.console = console
        self.refresh_s = refresh_s
        self._monotonic = monotonic
        self._last = float("-inf")
        self._dirty = True
        self.live = Live(console=console, auto_refresh=False, transient=False,
                         redirect_stdout=True, redirect_stderr=True,
                         vertical_overflow="ellipsis")

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            self.view.apply(event)
            cell = self.view.state.cells.get(event.get("cell") or "")
            line = warning_line(event, cell.label if cell is not None else "")
            if line is not None:  # above the view (Rich redirects stderr there), and kept
                print(line, file=sys.stderr, flush=True)
        except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop a campaign
            self.view.recent.append(f"(event {event.get('type')!r} not shown: "
                                    f"{type(exc).__name__}: {exc})")
        self._dirty = True

    def tick(self, force: bool = False) -> None:
        """Redraw if :data:`REFRESH_S` has passed since the last redraw (or ``force``)."""
        now = self._monotonic()
        if not force and now - self._last < self.refresh_s:
            return
        self._last = now
        self._dirty = False
        self.live.update(self._renderable(), refresh=True)

    def _renderable(self) -> RenderableType:
        try:
            return self.view.render()
        except Exception as exc:  # a display bug must not stop a campaign
            return Text(f"(live view failed: {type(exc).__name__}: {exc})")

    def __enter__(self) -> LiveProgress:
        self.live.start()
        self.tick(force=True)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self.live.update(self._renderable(), refresh=False)
        finally:
            self.live.stop()  # draws the final view once and leaves it on the screen
