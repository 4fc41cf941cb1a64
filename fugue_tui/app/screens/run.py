"""The run screen: a campaign as it runs (or as it ran), from its event files.

A thread worker (:mod:`fugue_tui.app.follow`) follows ``runner.jsonl`` and every cell's
``events.jsonl`` (:class:`engine.observe.follow.CampaignFollower`), tails the selected
cell's log and, when no cell runs, samples the host; it reaches the screen only through
:class:`Followed` messages. The screen applies events to the shared model
(:class:`fugue_tui.console.live.LiveView` over :class:`engine.observe.state.CampaignState`) and
redraws at most :data:`REFRESH_S` apart: the cell table updates only changed cells, the job
pane and charts redraw only when what they show changed, and nothing is redrawn while
another screen (help, Results) covers it. The cursor follows the running cell until the user
moves it (``f`` follows again). Warnings (a cell's ``warning`` events, the runner's, the
summary's) show under the selected cell and in the recent lines, and each is notified as it
comes. Commands go to the runner through its control channel (:mod:`engine.runner.control`).

| key | binding id | action |
|---|---|---|
| r | run.retry | kill the selected cell and retry it (asks first) |
| s | run.skip | kill or unqueue the selected cell and go on (asks first) |
| x | run.kill | kill the selected cell, no retry (asks first) |
| f | run.follow | follow the running cell |
| p | run.plan | back to the plan (when the campaign has ended) |
| v | run.results | the Results screen of this campaign's rows |
| d | run.stacks | the selected running cell's stack dumps, process tree and last events |
| z | run.zoom | one pane on the whole screen, in turn (cells, jobs, monitor, log, events) |
| t | run.monitor | the monitor pane: cell monitor → campaign timeline → loss/val curves |
| escape | run.back | close a replay, or leave a campaign that has ended |

The monitor pane has three views (``t``): the selected cell's monitor charts, the
campaign's host/device timeline with its cells' boundaries (:mod:`fugue_tui.app.models.timeline`)
and the selected cell's per-job loss and validation curves across executors
(:mod:`fugue_tui.app.models.curves`); both are fed from the same events, live and in replay.

Replay (:mod:`fugue_tui.app.models.replay`): the same screen over a recorded stream. A replay
worker, instead of the follow worker, posts the events whose time has come in the same
:class:`Followed` messages, and the screen's clock is the replay's (campaign time);
space pauses, ``n`` steps one event, ``+``/``-`` change the speed, ``E`` runs to the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from engine.observe.state import CellState
from fugue_tui.app.actions import REPLAY, RUN, bindings
from fugue_tui.app.compact import set_compact
from fugue_tui.app.follow import follow_run, replay_run
from fugue_tui.app.messages import Followed, Notice
from fugue_tui.app.models.curves import CurveStore, curves_text
from fugue_tui.app.models.run_text import (
    campaign_header,
    confirm_question,
    note_lifecycle,
)
from fugue_tui.app.models.series import HOST_PANELS, SampleStore, Series
from fugue_tui.app.models.timeline import CampaignTimeline
from fugue_tui.app.process import RunnerHandle
from fugue_tui.app.screens.modals import ConfirmScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.device_charts import DeviceCharts
from fugue_tui.app.widgets.footer import KeyFooter
from fugue_tui.app.widgets.job_progress import JobProgress
from fugue_tui.app.widgets.log_pane import MAX_LINES as LOG_LINES
from fugue_tui.app.widgets.log_pane import LogPane
from fugue_tui.live.event_text import warning_line
from fugue_tui.live.view import LiveView

#: Seconds between redraws (about 2 Hz).
REFRESH_S = 0.5
#: Seconds between two redraws of the timeline while the campaign runs: it spans the whole
#: campaign (minutes), and one draw costs 20-90 ms (plotext, binning every cell's samples).
TIMELINE_REDRAW_S = 5.0
#: What the monitor pane shows, in turn (``t``).
MONITOR_VIEWS = ("cell", "timeline", "curves")
#: The panes ``z`` zooms, in turn (then none: every pane again).
ZOOMS = ("cells", "jobs", "monitor", "log", "events")
#: Lifecycle lines kept for the events pane (it shows the newest that fit its height).
RECENT_KEPT = 50
#: Actions whose availability depends on the selected cell and the runner.
_CHECKED = ("retry_cell", "skip_cell", "kill_cell", "back_to_plan", "back", "dump_stacks")

def recent_text(lines: list[str], width: int, height: int, console: Any) -> Text:
    """The tail of ``lines`` that fills ``height`` rows of ``width`` columns once wrapped
    (all of them before the pane has a size)."""
    if not lines:
        return Text("no lifecycle events yet", style="dim")
    if width < 1 or height < 1:
        return Text("\n".join(lines))
    rows: list[Text] = []
    for line in reversed(lines):
        wrapped = list(Text(line).wrap(console, width))
        if len(rows) + len(wrapped) > height:
            if not rows:  # one line taller than the pane: its end, the newest words
                rows = wrapped[-height:]
            break
        rows = wrapped + rows
    return Text("\n").join(rows)


class RecentLines(Static):
    """The recent lifecycle lines, laid out at paint time for the pane's size then (the
    newest that fit, :func:`recent_text`): laid out when they changed, a pane that the
    layout resized afterwards (the header grows a row when a device appears) kept rows
    sized for its old height, and clipped the newest line at the bottom."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self._lines: list[str] = []

    def set_lines(self, lines: list[str]) -> None:
        if lines != self._lines:
            self._lines = lines
            self.refresh()

    def render(self) -> Text:
        size = self.content_size
        return recent_text(self._lines, size.width, size.height, self.app.console)


class RunScreen(Screen):
    """One campaign's run folder, followed live; see the module docstring."""

    BINDINGS = bindings(RUN + REPLAY)

    def __init__(self, run_dir: Path, handle: RunnerHandle | None, offset: int = 0,
                 attached: bool = False, clock: Callable[[], float] = time.time,
                 replay: Any = None) -> None:
        super().__init__()
        self.replay = replay
        if replay is not None:
            clock, handle = replay.clock, None
        self.run_dir = Path(run_dir)
        self.handle = handle
        self.event_offset = offset
        self.attached = attached
        self.clock = clock
        self.view = LiveView(0, clock=clock, recent=RECENT_KEPT)
        self.samples = SampleStore()
        self.timeline = CampaignTimeline()  # every cell's samples, for the timeline view
        self.curves = CurveStore()  # every cell's loss and validation, for the curves
        self.monitor_view = MONITOR_VIEWS[0]
        self.host = Series()
        self.runner_alive: bool | None = handle.alive() if handle is not None else False
        self.follow_running = True
        #: With several cells running: the one 'f' chose to follow (None: the first).
        self.follow_key: str | None = None
        self.log_target: str | None = None
        self.idle_poll = False
        self.dirty = True
        self.stopping = False
        self._shown_cell: str | None = None
        #: Log lines that arrived while the screen was hidden (fed on resume).
        self._hidden_log: list[tuple[list[str], bool, str]] = []
        self._suspended = False
        self._applicable: Any = None
        self._shown: dict[str, Any] = {}
        #: The "speedup so far" line, and the finished-cell count it was computed for.
        #: The speedups so far, ``(label, "1.20×", interval)`` each (:func:`speedup_parts`).
        self.so_far: list[tuple[str, str, str]] = []
        self._so_far_done = -1
        #: Redraws done and table cells written (the CPU benchmark and tests read them).
        self.redraws = 0
        self.table_writes = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="run-header")
        yield CellTable(id="cells")
        with Horizontal(id="run-middle"):
            with VerticalScroll(id="jobs-pane"):
                yield JobProgress(id="jobs")
            yield DeviceCharts(id="charts")
        with Horizontal(id="run-bottom"):
            yield LogPane(id="log")
            yield RecentLines(id="recent")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.on_resize()  # compact or not from the start
        self.query_one(CellTable).focus()
        if self.replay is not None:
            self._replay()
        else:
            self._follow()
        self.set_interval(REFRESH_S, self.refresh_view)

    # -- the follow worker (no widget access) ---------------------------------------------
    @work(thread=True, exclusive=True, group="follow")
    def _follow(self) -> None:
        follow_run(self, get_current_worker())

    @work(thread=True, exclusive=True, group="follow")
    def _replay(self) -> None:
        """Post the replay's due events as :class:`Followed` messages (as live)."""
        replay_run(self, get_current_worker())

    def on_followed(self, message: Followed) -> None:
        for event in message.events:
            try:
                self.view.apply(event)
            except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop us
                self.view.recent.append(f"(event {event.get('type')!r} not shown: {exc})")
            self._note(event)
            if self.samples.add(event):
                self.timeline.add(event)
            else:
                self.curves.add(event)
        if message.host_sample:
            self.host.add(message.host_sample, ("cpu_pct", "rss_mib"))
        if message.log_reset or message.log_lines:
            if message.log_path == self.log_target:
                feed = (message.log_lines, message.log_reset, self._log_title())
                if self._visible():
                    self.query_one(LogPane).feed(*feed)
                else:  # hidden: a repaint here would repaint the screen on top
                    self._hold_log(*feed)
        if message.runner_alive is not None:
            self.runner_alive = message.runner_alive
        self.dirty = True

    def _hold_log(self, lines: list[str], reset: bool, title: str) -> None:
        """Keep log lines for the resume, no more than the pane keeps: what a reset clears
        goes, and when too many arrived the oldest go and the pane is cleared first (it
        would have scrolled them out anyway)."""
        if reset:
            self._hidden_log.clear()
        self._hidden_log.append((lines, reset, title))
        held = sum(len(feed[0]) for feed in self._hidden_log)
        while held > LOG_LINES and len(self._hidden_log) > 1:
            held -= len(self._hidden_log.pop(0)[0])
            lines, _, title = self._hidden_log[0]
            self._hidden_log[0] = (lines, True, title)

    def _note(self, event: dict[str, Any]) -> None:
        """Lifecycle lines the batch view leaves out (it shows them elsewhere); a warning is
        also notified as it comes (a repaired results file must not scroll away unseen)."""
        note_lifecycle(self.view, event)
        line = warning_line(event, self._label(event))
        if line is not None:
            self.notify(line.removeprefix("fugue-tui: warning: "), severity="warning",
                        markup=False)

    def _label(self, event: dict[str, Any]) -> str:
        cell = self.view.state.cells.get(event.get("cell") or "")
        return cell.label if cell is not None else ""

    # -- rendering ------------------------------------------------------------------------
    def selected_cell(self) -> CellState | None:
        key = self.query_one(CellTable).selected_cell_key()
        return self.view.state.cells.get(key) if key else None

    def running_cell(self) -> CellState | None:
        """The running cell followed: with several at once (one per device), the one
        ``f`` chose while it runs, else the first."""
        running = self.running_cells()
        chosen = self.follow_key
        for cell in running:
            if cell.key == chosen:
                return cell
        return running[0] if running else None

    def running_cells(self) -> list[CellState]:
        """Every cell running now, in campaign order (several in a multi-device campaign)."""
        return [cell for cell in self.view.state.cells.values() if cell.active]

    def _visible(self) -> bool:
        """Shown: on top, or under a translucent dialog. Not under the help or the Results
        screen (Textual repaints the screen on top for every region a screen under it
        repaints, even an opaque one: the help repainted with every redraw here)."""
        stack = self.app.screen_stack
        if stack and stack[-1] is self:
            return True
        return len(stack) > 1 and stack[-2] is self and stack[-1].styles.background.a < 1

    def on_screen_suspend(self) -> None:
        self._suspended = True

    def on_screen_resume(self) -> None:
        """Back on top: what arrived while hidden, at once (not on the first resume: the
        widgets may not be mounted yet, and the interval draws soon enough)."""
        if not self._suspended:
            return
        self._suspended = False
        log = self.query_one(LogPane)
        for feed in self._hidden_log:
            log.feed(*feed)
        self._hidden_log.clear()
        self.dirty = True
        self.refresh_view()

    def refresh_view(self) -> None:
        """Redraw what changed (called every :data:`REFRESH_S`; nothing while hidden)."""
        if not self._visible():
            return
        running = self.running_cell()
        self.idle_poll = running is None and self.runner_alive is not False
        if self.replay is not None:
            self.idle_poll = False  # the host now is not the campaign's
            self.dirty = True  # the header's replay clock moves
        if not self.dirty and running is None and not self.idle_poll:
            return
        self.dirty = False
        now = self.clock()
        table = self.query_one(CellTable)
        self.table_writes += table.sync(self.view.state, now)
        if table.take_user_moved():
            self.follow_running = False  # the user chose a row: stop following
        if self.follow_running and running is not None and \
                table.selected_cell_key() != running.key:
            table.select_cell(running.key)
        cell = self.selected_cell()
        self._shown_cell = cell.key if cell is not None else None
        jobs = self.query_one(JobProgress)
        jobs.show(self.view, cell, now)
        if jobs.deferred:
            self.dirty = True  # held back by the rate limit: draw it on a later tick
        self._show_charts(cell, running)
        if self.query_one(DeviceCharts).deferred:
            self.dirty = True  # the timeline held back by its rate limit: a later tick
        target = cell.log_path if cell is not None and cell.log_path else None
        if target != self.log_target:
            self.log_target = target
            if target is None:
                self.query_one(LogPane).feed([], True, "log: no attempt yet")
        self._show_header(now)
        self._show_recent()
        # the footer recomposes on refresh_bindings: only when what is offered changed
        applicable = tuple(bool(self.check_action(a, ())) for a in _CHECKED)
        if applicable != self._applicable:
            self._applicable = applicable
            self.refresh_bindings()
        self.redraws += 1

    @work(thread=True, exclusive=True, group="so-far")
    def _speedup_so_far(self, runs_dir: Path, campaign: str) -> None:
        from fugue_tui.app.models.so_far import speedup_parts

        try:
            parts = speedup_parts(runs_dir, campaign)
        except (OSError, ValueError, KeyError) as exc:  # a display aid must not stop us
            parts = [("speedup so far:", "not computed", f"({type(exc).__name__}: {exc})")]
        self.app.call_from_thread(self._got_so_far, parts)

    def _got_so_far(self, parts: list[tuple[str, str, str]]) -> None:
        if parts != self.so_far:
            self.so_far = parts
            self.dirty = True
            self.call_after_refresh(self.refresh_view)

    def _show_charts(self, cell: CellState | None, running: CellState | None) -> None:
        charts = self.query_one(DeviceCharts)
        if self.monitor_view != "cell" and self._show_view(charts, cell):
            return
        series = self.samples.get(cell.key, cell.attempt) if cell is not None else None
        if series is not None and len(series.t):
            charts.set_title(f"monitor: {cell.label} attempt {cell.attempt}")
            charts.show(series, live=cell.active)  # an ended cell's value is its last
        elif running is None and len(self.host.t):
            charts.set_title("host (idle polling: no cell runs)")
            charts.show(self.host, HOST_PANELS)
        else:
            charts.set_title("monitor")
            charts.show(None, empty="no monitor samples for this cell (yet)")

    def _show_view(self, charts: DeviceCharts, cell: CellState | None) -> bool:
        """The timeline or the curves in the monitor pane (True: drawn or unchanged)."""
        import os

        from rich.text import Text as RichText

        from fugue_tui.app.models.timeline import render

        state = self.view.state
        if self.monitor_view == "timeline":
            charts.set_title("campaign timeline: cells' CPU, RSS, GPU (t: loss curves)")
            # the axis grows with the clock while the campaign runs: a second is enough
            tick = int(self.clock()) if state.state == "running" else None
            color = "NO_COLOR" not in os.environ
            charts.show_text(("timeline", color), (self.timeline.version, tick,
                                                   self._spans_signature()),
                             lambda w, h: RichText.from_ansi(render(
                                 self.timeline, state, self.clock(), w, h, color=color)),
                             every=TIMELINE_REDRAW_S)
            return True
        charts.set_title("loss and validation across executors (t: cell monitor)")
        charts.show_text(("curves", cell.key if cell else None),
                         (self.curves.version, self._spans_signature()),
                         lambda w, h: curves_text(self.curves, state, cell, w, h))
        return True

    def _spans_signature(self) -> tuple:
        return tuple((c.state, c.attempt) for c in self.view.state.cells.values())

    def action_monitor_view(self) -> None:
        """The monitor pane's next view; on a small terminal (no monitor pane) the pane
        is zoomed to, so the view shows."""
        views = MONITOR_VIEWS
        self.monitor_view = views[(views.index(self.monitor_view) + 1) % len(views)]
        if self.has_class("-compact") and self.zoomed != "monitor" \
                and self.monitor_view != "cell":
            for pane in ZOOMS:
                self.set_class(pane == "monitor", f"-zoom-{pane}")
            self.set_class(True, "-zoom")
        names = {"cell": "the selected cell's monitor", "timeline": "the campaign timeline",
                 "curves": "loss and validation across executors"}
        self.notify(f"monitor: {names[self.monitor_view]} (t: next)", timeout=2,
                    markup=False)
        self.dirty = True
        self.call_after_refresh(self.refresh_view)

    def _log_title(self) -> str:
        cell = self.selected_cell()
        return f"log: {cell.label} attempt {cell.attempt}" if cell else "log"

    def header_text(self, now: float) -> Text:
        """The campaign line: name, device, elapsed, counts, runner and outcome."""
        return campaign_header(self.view, self.run_dir, now, replay=self.replay,
                               runner_alive=self.runner_alive, attached=self.attached,
                               handle=self.handle, stopping=self.stopping)

    def _show_header(self, now: float) -> None:
        from fugue_tui.app.models.so_far import comparable, eta_seconds, fit_strip

        text = self.header_text(now)
        state = self.view.state
        done = sum(1 for cell in state.cells.values() if cell.finished)
        if done != self._so_far_done and self.replay is None:
            self._so_far_done = done  # rows land as cells finish: recompute then only
            if comparable(state):  # else no speedup yet: spare the analysis' imports
                self._speedup_so_far(self.run_dir.parent, state.campaign or self.run_dir.name)
        # one line of the header's width: a strip that wrapped was cut (issue 30, item 14)
        strip = fit_strip(self.so_far, eta_seconds(state, now) if state.state == "running"
                          else None, max(20, self.query_one("#run-header").content_size.width
                                         or self.app.size.width - 2))
        devices = devices_line(self.running_cells())
        if devices:
            text.append(f"\n{devices}", style="green")
        if strip:
            text.append(f"\n{strip}", style="cyan")
        before = self._shown.get("header")
        if text.plain != before:  # a layout pass only when its height may change
            self._shown["header"] = text.plain
            lines = text.plain.count("\n")
            header = self.query_one("#run-header", Static)
            # Three lines (the stylesheet's cap), more with one line per device when cells
            # run on several devices at once (at most eight of them shown in full).
            header.styles.max_height = 3 + min(8, devices.count("\n") + 1) if devices else 3
            header.update(text, layout=before is None or before.count("\n") != lines)

    def _show_recent(self) -> None:
        """The newest lifecycle lines that fit the pane, wrapped to its width, oldest at
        the top (the pane used to show the oldest and cut the newest one or two); laid out
        by the pane itself at its size when it paints (:class:`RecentLines`)."""
        self.query_one("#recent", RecentLines).set_lines(list(self.view.recent))

    def on_resize(self, event: Any = None) -> None:
        set_compact(self)
        self.dirty = True

    @property
    def zoomed(self) -> str:
        """The pane shown alone ("" for all of them)."""
        return next((z for z in ZOOMS if self.has_class(f"-zoom-{z}")), "")

    def action_zoom(self) -> None:
        """The next pane alone on the screen (after the last: every pane again)."""
        now = self.zoomed
        after = ZOOMS[ZOOMS.index(now) + 1] if now and now != ZOOMS[-1] else (
            "" if now else ZOOMS[0])
        for pane in ZOOMS:
            self.set_class(pane == after, f"-zoom-{pane}")
        self.set_class(bool(after), "-zoom")
        if after == "cells":
            self.query_one(CellTable).focus()
        self.notify(f"zoomed: {after} (z: next pane)" if after else "every pane (z: zoom)",
                    timeout=2, markup=False)
        self.dirty = True
        self.call_after_refresh(self.refresh_view)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The user (or the following) moved the cursor: show the cell now, not at the next
        redraw (nothing to do when the redraw that moved it already shows it)."""
        table = event.data_table
        if not isinstance(table, CellTable):
            return
        if table.take_user_moved():
            self.follow_running = False  # the user chose a row: stop following
        if table.selected_cell_key() != self._shown_cell:
            self.dirty = True
            self.call_after_refresh(self.refresh_view)

    # -- actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("retry_cell", "skip_cell", "kill_cell"):
            cell = self.selected_cell()
            if not self.runner_alive or cell is None or self.stopping:
                return False
            if action == "kill_cell":
                return cell.active
            if action == "skip_cell":
                return cell.active or cell.state == "queued"
            return cell.active or cell.state in ("failed", "killed")
        if action == "back_to_plan":
            return not self.runner_alive
        if action == "back":  # a live campaign is left with q (stop or detach)
            return (self.replay is not None or not self.runner_alive) and \
                len(self.app.screen_stack) > 2
        if action == "dump_stacks":  # a live cell of a live runner: something to ask
            cell = self.selected_cell()
            return (self.replay is None and cell is not None and cell.active
                    and bool(cell.pid) and bool(cell.log_path))
        if action in ("toggle_pause", "step", "faster", "slower", "to_end"):
            return self.replay is not None
        return True

    def action_retry_cell(self) -> None:
        self._confirm("retry")

    def action_skip_cell(self) -> None:
        self._confirm("skip")

    def action_kill_cell(self) -> None:
        self._confirm("kill")

    def _confirm(self, command: str) -> None:
        cell = self.selected_cell()
        if cell is None or not self.check_action(f"{command}_cell", ()):
            return
        question = confirm_question(command, cell)
        key = cell.key

        def answer(yes: bool | None) -> None:
            if yes:
                self._send(command, key)
        self.app.push_screen(ConfirmScreen(question, yes=command), answer)

    @work(thread=True, group="control")
    def _send(self, command: str, cell_key: str) -> None:
        from engine.errors import FugueError
        from engine.runner.control import send

        try:
            send(self.run_dir, command, cell_key)
        except FugueError as exc:
            self.post_message(Notice(str(exc), "error"))
            return
        self.post_message(Notice(f"sent {command} for cell {cell_key[:8]}"))

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, markup=False)  # type: ignore[arg-type]

    def action_dump_stacks(self) -> None:
        cell = self.selected_cell()
        if cell is None or not self.check_action("dump_stacks", ()):
            return
        self.notify(f"asking {cell.label}'s processes for their stacks…", timeout=2,
                    markup=False)
        self._dump(Path(cell.log_path).parent, int(cell.pid), cell.label, cell.attempt)

    @work(thread=True, group="stacks")
    def _dump(self, attempt_dir: Path, pid: int, label: str, attempt: int) -> None:
        from fugue_tui.app.models.stack_report import cell_report
        from fugue_tui.app.screens.modals import StackScreen

        try:
            report = cell_report(attempt_dir, pid, label)
        except OSError as exc:
            self.post_message(Notice(f"no stack dump of {label}: {exc}", "error"))
            return
        self.app.call_from_thread(self.app.push_screen, StackScreen(
            f"stacks of {label} attempt {attempt} (pid {pid})", report))

    def action_follow_running(self) -> None:
        # Several cells running (one per device): 'f' on a running row follows that one.
        selected = self.selected_cell()
        self.follow_key = selected.key if selected is not None and selected.active else None
        self.query_one(CellTable).take_user_moved()  # a move before 'f' is overruled by it
        self.follow_running = True
        self.dirty = True
        self.refresh_view()

    def action_back_to_plan(self) -> None:
        self.app.pop_screen()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_show_results(self) -> None:
        """The Results screen of the runs folder this campaign writes to, filtered to it."""
        from fugue_tui.app.screens.results import ResultsScreen

        name = self.view.state.campaign or self.run_dir.name
        self.app.push_screen(ResultsScreen(self.run_dir.parent, f"campaign:{name}"))

    # -- replay ---------------------------------------------------------------------------
    def _replay_changed(self) -> None:
        self.dirty = True
        self.refresh_view()

    def action_toggle_pause(self) -> None:
        self.replay.toggle_pause()
        self._replay_changed()

    def action_step(self) -> None:
        self.replay.step()
        self._replay_changed()

    def action_faster(self) -> None:
        self.replay.set_speed(True)
        self._replay_changed()

    def action_slower(self) -> None:
        self.replay.set_speed(False)
        self._replay_changed()

    def action_to_end(self) -> None:
        self.replay.to_end()
        self._replay_changed()

    # -- stop -----------------------------------------------------------------------------
    def active_pids(self) -> set[int]:
        return {c.pid for c in self.view.state.cells.values() if c.active and c.pid}

    @work(thread=True, exclusive=True, group="stop")
    def stop_runner(self, then: Callable[[list[int]], None]) -> None:
        """Stop the runner (SIGINT, wait, SIGKILL what is left), then call ``then`` with
        the pids that had to be killed, on the UI thread."""
        forced: list[int] = []
        if self.handle is not None:
            forced = self.handle.stop(cell_pids=self.active_pids())
        self.app.call_from_thread(then, forced)


def devices_line(running: list[CellState]) -> str:
    """Each device's running cell and what its monitor last read, one line per device, when
    cells run on several devices at once ("" otherwise)::

        running on 2 devices:
          device 1/2 cuda:0 GPU-…: XA seq pass 1 · GPU 87 % · VRAM 5,120 MiB · CPU 98 %

    A figure the monitor has not measured (no GPU, no sample yet) is left out, never 0."""
    placed = [c for c in running if c.device]
    if len(placed) < 2:
        return ""
    return "\n".join([f"running on {len(placed)} devices:"] + [
        "  " + " · ".join([f"{c.device}: {c.label}", *_device_figures(c.sample or {})])
        for c in placed])


def _device_figures(sample: dict) -> list[str]:
    """The device pane's figures from a cell's latest monitor sample (measured ones only)."""
    out = []
    for name, text in (("gpu_util_pct", "GPU {:.0f} %"), ("mem_used_mib", "VRAM {:,.0f} MiB"),
                       ("cpu_pct", "CPU {:.0f} %")):
        value = sample.get(name)
        if isinstance(value, (int, float)):
            out.append(text.format(value))
    return out
