"""The run screen: a campaign as it runs (or as it ran), from its event files.

A thread worker (:mod:`fugue_tui.app.follow`) follows ``runner.jsonl`` and every cell's
``events.jsonl`` (:class:`engine.observe.follow.CampaignFollower`), tails the selected
cell's log and, when no cell runs, samples the host; it reaches the screen only through
:class:`Followed` messages. The screen hands each message to its run model
(:class:`fugue_tui.app.models.run.RunModel`, the one consumer of the events for every
pane) and redraws at most :data:`REFRESH_S` apart, each pane from the model: the cell
table updates only changed cells, the job pane and the monitor pane
(:class:`~fugue_tui.app.widgets.device_charts.DeviceCharts`) redraw only when what they
show changed, the header (:class:`~fugue_tui.app.widgets.run_header.RunHeader`) and the
recent lines (:class:`~fugue_tui.app.widgets.recent_lines.RecentLines`) when their text
did, and nothing is redrawn while another screen (help, Results) covers it. The cursor
follows the running cell until the user moves it (``f`` follows again). Warnings (a cell's
``warning`` events, the runner's, the summary's) show under the selected cell and in the
recent lines, and each is notified as it comes. Commands go to the runner through its
control channel (:mod:`fugue_tui.app.screens.run_commands`). The panes are drawn together by
:class:`~fugue_tui.app.widgets.run_panes.RunPanes`; the zoom and whether the screen shows at
all are :mod:`fugue_tui.app.screens.run_layout`'s.

Its keys (retry, skip, kill, stop, follow, plan, results, stacks, zoom, monitor view, back; in
replay pause, step, faster, slower, to end) are declared, with what each does, in
:data:`fugue_tui.app.actions.RUN` and :data:`~fugue_tui.app.actions.REPLAY` (the help
screen lists them). The cell filter and the bulk retry/skip (``F``, ``R``, ``K``) are
:mod:`~fugue_tui.app.screens.bulk`'s; the watchdog's alerts :mod:`fugue_tui.app.alerts`'.

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
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable
from textual.worker import get_current_worker

from engine.observe.state import CellState
from fugue_tui.app.actions import NAV, REPLAY, RUN, RUN_NAV, bindings, by_id
from fugue_tui.app.alerts import CellAlerts
from fugue_tui.app.compact import set_compact
from fugue_tui.app.follow import follow_run, replay_run
from fugue_tui.app.messages import Followed, Notice
from fugue_tui.app.models.cell_filter import CellFilter
from fugue_tui.app.models.run import RunModel, devices_line, followed_cell
from fugue_tui.app.models.timeline import CampaignTimeline
from fugue_tui.app.process import RunnerHandle
from fugue_tui.app.screens import replay_seek
from fugue_tui.app.screens.bulk import BulkCommands
from fugue_tui.app.screens.run_commands import CellCommands
from fugue_tui.app.screens.run_layout import (
    ZOOMS,
    QuietWhenCovered,
    focus_zoomed,
    mark_focus,
    next_zoom,
    visible,
    zoom_to,
    zoomed,
)
from fugue_tui.app.screens.run_nav import RunNavigation
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.device_charts import VIEW_NAMES, DeviceCharts
from fugue_tui.app.widgets.footer import KeyFooter
from fugue_tui.app.widgets.host_bar import HostBar
from fugue_tui.app.widgets.job_progress import JobProgress, JobsPane
from fugue_tui.app.widgets.log_pane import MAX_LINES as LOG_LINES
from fugue_tui.app.widgets.log_pane import Feed, LogPane, hold
from fugue_tui.app.widgets.recent_lines import RecentLines
from fugue_tui.app.widgets.run_header import RunHeader
from fugue_tui.app.widgets.run_panes import NO_LOG, RunPanes
from fugue_tui.live.view import LiveView

# devices_line moved to the model, ZOOMS to run_layout; tests still import them from here.
__all__ = ["REFRESH_S", "ZOOMS", "RunScreen", "devices_line"]

#: Seconds between redraws (about 2 Hz).
REFRESH_S = 0.5
#: Actions whose availability depends on the selected cell and the runner.
_CHECKED = ("retry_cell", "skip_cell", "kill_cell", "back_to_plan", "back", "dump_stacks",
            "why_no_stacks", "stop_campaign")


class RunScreen(RunNavigation, QuietWhenCovered):
    """One campaign's run folder, followed live; see the module docstring.

    The screen holds no campaign data of its own: :attr:`model` (:class:`RunModel`) takes
    each :class:`Followed` message, the panes draw from it in :meth:`refresh_view`.
    ``dirty`` is a plain flag, not a reactive: it coalesces the messages and moves of a
    half-second into one redraw at the next tick (a watcher would redraw per message).
    ``follow_running`` (the cursor follows the running cell) and ``follow_key`` (which one,
    when several run) are the user's choice: a move of the cursor ends the following,
    ``f`` starts it again."""

    #: j/k/g/G reach the screen when no pane has the focus (the monitor or the events
    #: zoomed): they move the cell table's cursor, hidden or not.
    #: ``d`` with nothing to dump runs a hidden twin of run.stacks (the same key and id, so
    #: a keymap moves both) that says why: the footer offers "stacks" only where it applies,
    #: but the key must not do nothing silently (issue 47). RUN_NAV's n, Escape: search_applies.
    BINDINGS = bindings(RUN + REPLAY + tuple(
        replace(a, action=f"cells('{a.action}')") for a in NAV) + (
        replace(by_id("run.stacks"), action="why_no_stacks", show=False),
        by_id("run.processes")) + RUN_NAV)
    #: The panes, found once mounted.
    panes: RunPanes

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
        self.model = RunModel(clock, handle.alive() if handle is not None else False)
        self.commands = CellCommands(self)
        self.bulk, self.cell_filter = BulkCommands(self), CellFilter()  # F, R, K
        self.alerts = CellAlerts(live=replay is None)  # a suspect or hung cell: bell, notify
        self.follow_running = True
        #: With several cells running: the one 'f' chose to follow (None: the first).
        self.follow_key: str | None = None
        #: What the follow worker reads: the log to tail, whether to sample the host.
        self.log_target: str | None = None
        self.idle_poll = False
        self.dirty = True
        self.stopping = False
        self._shown_cell: str | None = None
        #: Log lines that arrived while the screen was hidden (fed on resume).
        self._hidden_log: list[Feed] = []
        self._suspended = False
        self._applicable: tuple[bool, ...] | None = None
        #: Redraws done and table cells written (the CPU benchmark and tests read them).
        self.redraws = 0
        self.table_writes = 0

    # -- the model's stores, under the names tests and the app read -----------------------
    @property
    def view(self) -> LiveView:
        return self.model.view

    @property
    def timeline(self) -> CampaignTimeline:
        return self.model.timeline

    @property
    def runner_alive(self) -> bool | None:
        return self.model.runner_alive

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield HostBar(id="host-bar")
        yield CellTable(id="cells")
        with Horizontal(id="run-middle"):
            with JobsPane(id="jobs-pane"):
                yield JobProgress(id="jobs")
            yield DeviceCharts(id="charts")
        with Horizontal(id="run-bottom"):
            yield LogPane(id="log")
            yield RecentLines(id="recent")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.panes = RunPanes.of(self)
        self.alerts.settings = getattr(self.app, "alert_settings", self.alerts.settings)
        self.on_resize()  # compact or not from the start
        self.query_one(CellTable).focus()
        mark_focus(self)
        # new speedups so far: show them now, not at the next tick
        self.watch(self.panes.header, "so_far", self._redraw_soon, init=False)
        self._follow()
        self.set_interval(REFRESH_S, self.refresh_view)

    def _redraw_soon(self) -> None:
        """Redraw after this refresh (a change the user should see at once)."""
        self.dirty = True
        self.call_after_refresh(self.refresh_view)

    # -- the follow worker (no widget access) ---------------------------------------------
    @work(thread=True, exclusive=True, group="follow")
    def _follow(self) -> None:
        """Post the campaign's news as :class:`Followed` messages: the run folder's, or the
        replay's due events (as live)."""
        (follow_run if self.replay is None else replay_run)(self, get_current_worker())

    def on_followed(self, message: Followed) -> None:
        """A worker's news: the model takes the events and the facts, the log pane its
        lines; each warning is notified as it comes (a repaired results file must not
        scroll away unseen); the panes redraw at the next tick."""
        stale = self.replay is not None and message.generation != self.replay.generation
        for notice in self.model.apply([] if stale else message.events):  # stale: pre-seek
            self.notify(notice, severity="warning", markup=False)
        self.alerts.take(self.app, self.view.state, message.events)
        self.model.observe(message.host_sample, message.runner_alive)
        if (message.log_reset or message.log_lines) and message.log_path == self.log_target:
            feed = (message.log_lines, message.log_reset, self._log_title())
            if visible(self):
                self.panes.log.feed(*feed)
                mark_focus(self)  # a new log's title: marked again if it has the keys
            else:  # hidden: a repaint here would repaint the screen on top
                self._hold_log(*feed)
        self.dirty = True

    def _hold_log(self, lines: list[str], reset: bool, title: str) -> None:
        """Keep log lines for the resume, no more than the pane keeps (:func:`hold`)."""
        hold(self._hidden_log, (lines, reset, title), LOG_LINES)

    # -- rendering ------------------------------------------------------------------------
    def selected_cell(self) -> CellState | None:
        return self.model.cell(self.query_one(CellTable).selected_cell_key())

    def running_cell(self) -> CellState | None:
        """The running cell followed (:func:`followed_cell`)."""
        return followed_cell(self.running_cells(), self.follow_key)

    def running_cells(self) -> list[CellState]:
        """Every cell running now, in campaign order (several in a multi-device campaign)."""
        return self.model.running_cells()

    def on_screen_suspend(self) -> None:
        self._suspended = True

    def on_screen_resume(self) -> None:
        """Back on top: what arrived while hidden, at once (not on the first resume: the
        widgets may not be mounted yet, and the interval draws soon enough)."""
        if self._suspended:
            self._suspended = False
            self.panes.feed_held(self._hidden_log)
            mark_focus(self)
            self.dirty = True
            self.refresh_view()

    def refresh_view(self) -> None:
        """Redraw what changed (called every :data:`REFRESH_S`; nothing while hidden)."""
        if not visible(self):
            return
        running = self.running_cell()
        # the host is sampled while nothing runs; in a replay the host now is not the
        # campaign's, and the header's replay clock moves
        self.idle_poll = running is None and self.runner_alive is not False \
            and self.replay is None
        self.dirty = self.dirty or self.replay is not None
        if not self.dirty and running is None and not self.idle_poll:
            return
        self.dirty = False
        now = self.clock()
        table = self.query_one(CellTable)
        shown = self.cell_filter
        self.table_writes += table.sync(self.view.state, now, shown.keeps if shown.active else None)
        table.set_title(shown.title(self.view.state.cells.values()))
        self._note_user_move(table)
        table.follow(running.key if self.follow_running and running is not None else None)
        cell = self.selected_cell()
        self._shown_cell = cell.key if cell is not None else None
        target = cell.log_path if cell is not None and cell.log_path else None
        if target != self.log_target:
            self.log_target = target
            if target is None:
                self.panes.log.feed([], True, NO_LOG)
                mark_focus(self)
        if self.panes.draw(self.model, cell, running, now, self.run_dir, replay=self.replay,
                           attached=self.attached, handle=self.handle, stopping=self.stopping):
            self.dirty = True  # held back by a pane's rate limit: draw it on a later tick
        # the footer recomposes on refresh_bindings: only when what is offered changed
        applicable = tuple(bool(self.check_action(a, ())) for a in _CHECKED)
        if applicable != self._applicable:
            self._applicable = applicable
            self.refresh_bindings()
        self.redraws += 1

    def _note_user_move(self, table: CellTable) -> None:
        if table.take_user_moved():
            self.follow_running = False  # the user chose a row: stop following

    def _log_title(self) -> str:
        cell = self.selected_cell()
        return f"log: {cell.label} attempt {cell.attempt}" if cell else "log"

    def on_descendant_focus(self) -> None:
        mark_focus(self)

    def on_descendant_blur(self) -> None:
        mark_focus(self)

    def on_resize(self, event: Any = None) -> None:
        self.query_one(CellTable).set_compact(set_compact(self))
        self.dirty = True

    @property
    def zoomed(self) -> str:
        """The pane shown alone ("" for all of them)."""
        return zoomed(self)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The user (or the following) moved the cursor: show the cell now, not at the next
        redraw (nothing to do when the redraw that moved it already shows it)."""
        table = event.data_table
        if isinstance(table, CellTable):
            self._note_user_move(table)
            if table.selected_cell_key() != self._shown_cell:
                self._redraw_soon()

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, markup=False)

    # -- actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.commands.available(action) and self.search_applies(action)

    def action_retry_cell(self) -> None:
        self.commands.confirm("retry")

    def action_skip_cell(self) -> None:
        self.commands.confirm("skip")

    def action_kill_cell(self) -> None:
        self.commands.confirm("kill")

    def action_dump_stacks(self) -> None:
        self.commands.dump_stacks()

    def action_stop_campaign(self) -> None:
        self.commands.confirm_stop()

    def action_why_no_stacks(self) -> None:
        self.commands.why_no_stacks()

    def action_follow_running(self) -> None:
        # Several cells running (one per device): 'f' on a running row follows that one.
        selected = self.selected_cell()
        self.follow_key = selected.key if selected is not None and selected.active else None
        self.query_one(CellTable).take_user_moved()  # a move before 'f' is overruled by it
        self.follow_running = True
        self._redraw_now()

    def action_monitor_view(self) -> None:
        """The monitor pane's next view; on a small terminal (no monitor pane) the pane
        is zoomed to, so the view shows."""
        view = self.panes.charts.next_view()
        if self.has_class("-compact") and self.zoomed != "monitor" and view != "cell":
            zoom_to(self, "monitor")
            focus_zoomed(self, "monitor")
        self.notify(f"monitor: {VIEW_NAMES[view]} (t: next)", timeout=2, markup=False)
        self._redraw_soon()

    def action_zoom(self) -> None:
        """The next pane alone on the screen (after the last: every pane again)."""
        after = next_zoom(self.zoomed)
        zoom_to(self, after)
        focus_zoomed(self, after)
        self.notify(f"zoomed: {after} (z: next pane)" if after else "every pane (z: zoom)",
                    timeout=2, markup=False)
        self._redraw_soon()

    def action_cell_set(self, command: str) -> None:
        """``F``, ``R``, ``K``: :class:`BulkCommands`' ``command`` (filter, retry_failed…)."""
        getattr(self.bulk, command)()

    def action_cells(self, action: str) -> None:
        """Run the cell table's move ``action`` (``cursor_down``…) from the screen."""
        getattr(self.query_one(CellTable), f"action_{action}")()

    def action_back_to_plan(self) -> None:
        self.app.pop_screen()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_show_processes(self) -> None:
        from fugue_tui.app.screens.processes import ProcessScreen

        self.app.push_screen(ProcessScreen(self))

    def action_show_results(self) -> None:
        """The Results screen of the runs folder this campaign writes to, filtered to it."""
        from fugue_tui.app.screens.results import ResultsScreen

        name = self.view.state.campaign or self.run_dir.name
        self.app.push_screen(ResultsScreen(self.run_dir.parent, f"campaign:{name}"))

    # -- replay: change its clock, speed or position, and show it at once ------------------
    def _redraw_now(self, change: Callable[[], object] | None = None) -> None:
        if change is not None:
            change()
        self.dirty = True
        self.refresh_view()

    def action_toggle_pause(self) -> None:
        self._redraw_now(self.replay.toggle_pause)

    def action_step(self) -> None:
        self._redraw_now(self.replay.step)

    def action_faster(self) -> None:
        self._redraw_now(partial(self.replay.set_speed, True))

    def action_slower(self) -> None:
        self._redraw_now(partial(self.replay.set_speed, False))

    def action_to_end(self) -> None:
        self._redraw_now(self.replay.to_end)

    def action_seek(self, direction: int) -> None:
        replay_seek.seek_by(self, direction)

    def action_seek_to(self) -> None:
        replay_seek.ask_time(self)

    # -- stop -----------------------------------------------------------------------------
    def active_pids(self) -> set[int]:
        return self.model.active_pids()

    def begin_stop(self, then: Callable[[list[int]], None]) -> None:
        """Stop the campaign (:meth:`stop_runner`), saying so: quit's "stop" and ``S``
        both come here."""
        self.stopping = True
        self.notify("stopping: the runner records the running cell as killed…", markup=False)
        self.stop_runner(then)

    @work(thread=True, exclusive=True, group="stop")
    def stop_runner(self, then: Callable[[list[int]], None]) -> None:
        """Stop the runner (SIGINT, wait, SIGKILL what is left), then call ``then`` with
        the pids that had to be killed, on the UI thread."""
        forced: list[int] = []
        if self.handle is not None:
            forced = self.handle.stop(cell_pids=self.active_pids())
        self.app.call_from_thread(then, forced)
