"""The process view (``P`` on the run screen): the campaign's processes with their CPU, RSS
and GPU memory, refreshed every :data:`~fugue_tui.app.models.processes.SAMPLE_S` by a
thread worker (:class:`~fugue_tui.app.models.processes.ProcessSampler`: psutil and NVML off
the UI thread), sortable (``o`` picks the column, ``O`` reverses), and a cell's process
killed by pid (``x`` the selected row, ``K`` a typed pid): a modal names the pid and its
command, then the kill goes to the runner as the cell's ``kill`` control command carrying
the pid (:func:`engine.runner.control.send`), so the runner's journal says who killed what.
A pid that is not the campaign's, the runner's own, or one in no cell is refused in one line
(:func:`~fugue_tui.app.models.processes.kill_target`)."""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from fugue_tui.app.actions import NAV, PROCESSES, bindings
from fugue_tui.app.messages import Notice
from fugue_tui.app.models.processes import (
    COLUMNS,
    SAMPLE_S,
    KillTarget,
    ProcessSampler,
    ProcRow,
    cell_text,
    confirm_text,
    kill_target,
    sort_rows,
)
from fugue_tui.app.screens.modals import ConfirmScreen, PathScreen
from fugue_tui.app.screens.run_layout import QuietWhenCovered
from fugue_tui.app.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from fugue_tui.app.screens.run import RunScreen


class ColumnPicker(ModalScreen[str | None]):
    """``o``: the columns, one a line, the sorted one marked; Enter picks, Escape keeps."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="procsort.cancel")]

    def __init__(self, column: str, reverse: bool) -> None:
        super().__init__()
        self.column, self.reverse = column, reverse

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Sort the processes by (Enter; the sorted column again reverses it; "
                        "esc cancels):", id="question")
            yield OptionList(*(Option(header + (f"  (sorted {'↓' if self.reverse else '↑'})"
                                                if key == self.column else ""), id=key)
                               for key, header, _ in COLUMNS), id="proc-columns")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [key for key, _, _ in COLUMNS]
        options.highlighted = keys.index(self.column) if self.column in keys else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ProcessScreen(QuietWhenCovered):
    """One campaign's processes (see the module). ``nvml``: passed to the sampler (tests:
    a fake NVML; False: none)."""

    BINDINGS = bindings(tuple(a for a in PROCESSES if a.id != "run.processes") + NAV)

    def __init__(self, run: RunScreen, nvml: Any = None) -> None:
        super().__init__()
        self.run = run
        self.nvml = nvml
        self.sort_column, self.sort_reverse = "cpu_pct", True
        self.rows: list[ProcRow] = []
        #: The table's texts as written, row by row (what :meth:`show_rows` compares).
        self._shown: list[list[str]] = []
        self._title_text = ""
        #: pid → (cell key, label) of the running cells, copied on the UI thread for the
        #: worker (the run model is the UI thread's).
        self.cell_pids: dict[int, tuple[str, str]] = {}
        self.sampler: ProcessSampler | None = None
        #: Seconds of CPU (this process, all threads) the sampling took, and samples taken:
        #: what the view costs (the dashboard-cost check reads them).
        self.sample_cpu_s = 0.0
        self.samples = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="procs-title")
        table: DataTable = DataTable(id="procs", cursor_type="row", zebra_stripes=True)
        yield table
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, header, _ in COLUMNS:
            table.add_column(header, key=key)
        table.focus()
        self._copy_cells()
        self.set_interval(SAMPLE_S, self._copy_cells)
        self._title()
        self._sample()

    def _copy_cells(self) -> None:
        self.cell_pids = {int(c.pid): (c.key, c.label) for c in self.run.running_cells()
                          if c.pid}

    def runner_pid(self) -> int | None:
        handle = self.run.handle
        if handle is not None:
            return int(handle.pid)
        return self.run.view.state.runner_pid if self.run.runner_alive else None

    @work(thread=True, exclusive=True, group="processes")
    def _sample(self) -> None:
        """(thread worker) Sample every :data:`SAMPLE_S` and hand the rows to the UI."""
        worker = get_current_worker()
        self.sampler = sampler = ProcessSampler(self.runner_pid(), lambda: self.cell_pids,
                                                self.nvml)
        try:
            while not worker.is_cancelled:
                began = time.thread_time()
                rows = sampler.sample()
                self.sample_cpu_s += time.thread_time() - began
                self.samples += 1
                self.app.call_from_thread(self.show_rows, rows)
                time.sleep(SAMPLE_S)
        finally:
            sampler.close()

    def show_rows(self, rows: list[ProcRow]) -> None:
        """Redraw the table from ``rows`` (sorted), the cursor kept on the same pid. The
        same processes in the same order: only the cells whose text changed are written
        (a rebuild each second cost most of the view's CPU); else the table is rebuilt."""
        if not self.is_attached:  # closed while the sample was on its way
            return
        self.rows = rows
        table = self.query_one(DataTable)
        ordered = sort_rows(rows, self.sort_column, self.sort_reverse)
        texts = [[cell_text(row.value(key), key) for key, _, _ in COLUMNS] for row in ordered]
        keys = [str(row.pid) for row in ordered]
        if keys == [str(k.value) for k in table.rows]:
            for key, new, old in zip(keys, texts, self._shown, strict=True):
                for (column, _, _), text, was in zip(COLUMNS, new, old, strict=True):
                    if text != was:
                        table.update_cell(key, column, text)
        else:
            chosen = self.selected_pid()
            table.clear()
            for key, row_texts in zip(keys, texts, strict=True):
                table.add_row(*row_texts, key=key)
            if chosen is not None and str(chosen) in keys:
                table.move_cursor(row=keys.index(str(chosen)))
        self._shown = texts
        self._title()

    def _title(self) -> None:
        header = dict((k, h) for k, h, _ in COLUMNS)[self.sort_column]
        title = (f" of {self.run.view.state.campaign or self.run.run_dir.name}"
                 f" · {len(self.rows)} · sorted by {header} {'↓' if self.sort_reverse else '↑'}"
                 " · GPU MiB empty: not measured")
        if title != self._title_text:  # unchanged: not repainted
            self._title_text = title
            self.query_one("#procs-title", Static).update(  # one line: no layout pass
                Text.assemble(("processes", "bold"), title), layout=False)

    def selected_pid(self) -> int | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # no row under the cursor
            return None
        return int(key) if key else None

    # -- sorting --------------------------------------------------------------------------
    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by ``column``; the sorted one again without ``reverse``: reversed."""
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else \
                dict((k, n) for k, _, n in COLUMNS)[column]  # numbers: largest first
        self.sort_column, self.sort_reverse = column, reverse
        self.show_rows(self.rows)

    def action_pick_sort(self) -> None:
        self.app.push_screen(ColumnPicker(self.sort_column, self.sort_reverse),
                             lambda column: self.sort_by(column) if column else None)

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    # -- kill -----------------------------------------------------------------------------
    def action_kill_selected(self) -> None:
        pid = self.selected_pid()
        if pid is not None:
            self.ask_kill(pid)

    def action_kill_pid(self) -> None:
        def typed(text: str | None) -> None:
            if text is None:
                return
            if not text.strip().isascii() or not text.strip().isdigit():
                self.notify(f"not a pid: {text!r}", severity="warning", markup=False)
                return
            self.ask_kill(int(text.strip()))
        self.app.push_screen(PathScreen("Kill the process of pid (a process of this "
                                        "campaign's cells):", ""), typed)

    def target(self, pid: int) -> KillTarget:
        """What a kill of ``pid`` does now: against the rows shown, less those gone (a pid
        reused since is not the campaign's)."""
        alive = {p.pid for p in (self.sampler.tree() if self.sampler else [])}
        return kill_target(pid, [r for r in self.rows if r.pid in alive])

    def ask_kill(self, pid: int) -> None:
        """Refuse in one line, or ask (naming the pid and its command) and send."""
        target = self.target(pid)
        if target.cell_key is None or target.row is None:
            self.notify(target.refusal, severity="warning", markup=False)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.run_worker(partial(self._send, target), thread=True, group="control")
        self.app.push_screen(ConfirmScreen(confirm_text(target), yes="Kill"), answer)

    def _send(self, target: KillTarget) -> None:
        """(thread worker) The cell's kill, carrying the pid, to the runner."""
        from engine.errors import FugueError
        from engine.runner.control import send

        row = target.row
        assert row is not None and target.cell_key is not None
        try:
            send(self.run.run_dir, "kill", target.cell_key, pid=row.pid, process=row.command)
        except FugueError as exc:
            self.post_message(Notice(str(exc), "error"))
            return
        self.post_message(Notice(f"sent kill for pid {row.pid} (cell {row.cell})"))

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, markup=False)

    def action_cursor_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()

    def action_scroll_top(self) -> None:
        self.query_one(DataTable).action_scroll_top()

    def action_scroll_bottom(self) -> None:
        self.query_one(DataTable).action_scroll_bottom()

    def action_back(self) -> None:
        self.app.pop_screen()
