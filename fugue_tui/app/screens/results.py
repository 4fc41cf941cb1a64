"""The Results screen: the group rows of a runs folder (ours or the fugue harness's), a
filter and a sort over them, the provenance of the selected row, and the figures of the
filtered rows as terminal charts (:mod:`fugue_tui.app.widgets.figure_charts`), redrawn when
rows land, with the K-sweep curves, their knees and the advice under them; an hpo row's
best-so-far curve over its provenance (:mod:`fugue_tui.app.widgets.provenance`). What the
load left out (a file's torn last line) is said under the header and notified once.

A thread worker watches the results files (size and mtime, every :data:`POLL_S`) and,
when they changed or the filter did, loads them (:func:`engine.results.load.load_runs`) and
analyses them (:func:`fugue_tui.app.models.results.analyse`, the analysis ``fugue-tui
report`` uses); only a :class:`~fugue_tui.app.messages.ResultsLoaded` message reaches the
widgets.
Export writes the same figures as PNG/SVG and the LaTeX table
(:func:`fugue_tui.report.tables.export_results`).

| key | binding id | action |
|---|---|---|
| / | results.filter | edit the filter (see :mod:`fugue_tui.app.models.results`) |
| o | results.sort | pick the column to sort by (:class:`SortPicker`; a header click sorts by that column) |
| O | results.reverse | reverse the sort |
| c | results.columns | choose the columns shown (:class:`~fugue_tui.app.screens.results_columns.ColumnPicker`), saved per user (:mod:`fugue_tui.app.models.results_columns`) |
| e | results.export | write the figures (PNG, SVG) and the LaTeX table to a folder |
| escape | results.back | back to the previous screen |
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from engine.errors import FugueError
from fugue_tui.app.actions import LEAVE, RESULTS, bindings
from fugue_tui.app.clipboard import copy_shown
from fugue_tui.app.messages import Notice, ResultsLoaded
from fugue_tui.app.models.results import (
    COLUMNS,
    Filter,
    files_signature,
    header_text,
    parse_filter,
    result_files,
    row_key,
)
from fugue_tui.app.models.results_columns import (
    DEFAULT_HIDDEN,
    load_hidden,
    save_hidden,
)
from fugue_tui.app.screens.modals import PathScreen
from fugue_tui.app.screens.results_columns import ColumnPicker
from fugue_tui.app.screens.results_export import ResultsExport
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK
from fugue_tui.app.widgets.figure_charts import FigureCharts
from fugue_tui.app.widgets.footer import KeyFooter
from fugue_tui.app.widgets.group_table import GroupTable
from fugue_tui.app.widgets.provenance import ProvenancePane

if TYPE_CHECKING:  # the results' modules load in the loading worker, off the UI thread
    from engine.results.load import Runs
    from fugue_tui.app.models.results import Signature
    from fugue_tui.report.figures import Results

#: Seconds between two checks of the results files.
POLL_S = 1.0
#: An export is answered by an Enter that comes this long after its dialog appeared, not by
#: keys typed ahead of it (:class:`fugue_tui.app.screens.modals.PathScreen`): longer than a
#: burst of typing (tens of ms a key), shorter than reading the dialog.
EXPORT_ARM_S = 0.5


class FilterBox(Input):
    """The filter box: Escape leaves it for the table (the text typed stays, applied or
    not), its own priority binding, so that only while it has the focus Escape does not
    go back (the footer says ``esc back`` elsewhere).

    Focused (``/``), it keeps the filter in effect with the cursor at its end: Textual's
    select-on-focus made the first key typed replace it, so ``/`` seemed to open an empty
    filter (issue 47)."""

    BINDINGS = bindings(LEAVE)

    def __init__(self, value: str = "", **kwargs: Any) -> None:
        super().__init__(value, select_on_focus=False, **kwargs)

    def on_focus(self) -> None:
        self.cursor_position = len(self.value)

    def action_leave_field(self) -> None:
        # at once (Widget.focus waits for the next idle): the keys after Escape follow it
        self.screen.set_focus(self.screen.query_one(GroupTable))


class SortPicker(ModalScreen[str | None]):
    """``o``: the columns to sort by, one a line, the current sort marked and highlighted;
    Enter sorts by the one highlighted (the sorted one again: reversed), a letter moves to
    the next column whose header starts with it, Escape leaves the sort as it was.

    A list rather than the column under the cursor: the table's cursor is a row (it picks
    the provenance shown), and half the columns are off-screen below 160 columns; a list
    names them all and reaches any in a key or two (issue 47: ``o`` stepped through them
    one at a time)."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="sort.cancel")]

    def __init__(self, column: str, reverse: bool) -> None:
        super().__init__()
        self.column, self.reverse = column, reverse

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Sort the rows by (Enter; the sorted column again reverses it; "
                        "a letter jumps; esc cancels):", id="question")
            yield OptionList(*(Option(self._label(key, header), id=key)
                               for key, header, _ in COLUMNS), id="sort-columns")

    def _label(self, key: str, header: str) -> str:
        if key != self.column:
            return header
        return f"{header}  (sorted {'↓ descending' if self.reverse else '↑ ascending'})"

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [key for key, _, _ in COLUMNS]
        options.highlighted = keys.index(self.column) if self.column in keys else 0
        options.focus()

    def on_key(self, event: events.Key) -> None:
        """A letter: the next column (after the highlighted one, round) whose header
        starts with it."""
        char = (event.character or "").lower()
        if len(char) != 1 or not char.isalpha():
            return
        options = self.query_one(OptionList)
        start = options.highlighted if options.highlighted is not None else -1
        n = len(COLUMNS)
        for step in range(1, n + 1):
            at = (start + step) % n
            if COLUMNS[at][1].lower().startswith(char):
                options.highlighted = at
                break
        event.stop()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ResultsScreen(Screen):
    """See the module docstring. ``source``: a runs folder or a results file;
    ``filter_text``: the initial filter (the run screen passes ``campaign:<id>``)."""

    BINDINGS = bindings(RESULTS)

    def __init__(self, source: str | Path, filter_text: str = "", n_boot: int = 2000) -> None:
        super().__init__()
        self.source = Path(source)
        self.filter_text = filter_text
        self.n_boot = n_boot
        self.runs: Runs | None = None
        self.shown: Runs | None = None
        self.results: Results | None = None
        #: Row key → its cell's ttb_speedup (hpo rows with a baseline-executor cell).
        self._ttb: dict[str, float] = {}
        #: Row key → its cell's T_group speedup over seq (the ok rows with a seq cell).
        self._speedup: dict[str, float] = {}
        self._by_key: dict[str, dict[str, object]] = {}
        self._wake = threading.Event()
        #: The load notes already notified (:attr:`engine.results.load.Runs.notes`).
        self._told: set[str] = set()
        self._exporter = ResultsExport(self)
        #: The columns the user hid (their saved choice); a file that cannot be read gives
        #: the defaults and one warning, on mount.
        self._columns_problem = ""
        try:
            self._hidden = load_hidden()
        except FugueError as exc:
            self._hidden, self._columns_problem = DEFAULT_HIDDEN, str(exc)
        #: Loads applied (tests read them).
        self.loads = 0

    @property
    def chart_draws(self) -> int:
        """Chart redraws so far (tests read them)."""
        return self.query_one(FigureCharts).draws

    def compose(self) -> ComposeResult:
        yield Static("", id="results-header")
        yield FilterBox(self.filter_text, id="results-filter",
                    placeholder="filter: exp:D_ens executor:unified k:8 gpu:none host:… "
                                "campaign:… (Enter applies)")
        with Horizontal(id="results-top"):
            yield GroupTable(hidden=self._hidden)
            yield ProvenancePane()
        yield FigureCharts()
        yield KeyFooter()

    def on_resize(self, event: events.Resize | None = None) -> None:
        from fugue_tui.app.compact import set_compact

        set_compact(self)
        if event is not None:  # the charts follow the screen's width, not their own
            self.call_after_refresh(self.query_one(FigureCharts).redraw)

    def on_mount(self) -> None:
        self.on_resize()
        self.query_one(GroupTable).focus()
        if self._columns_problem:
            self.notify(f"{self._columns_problem}; showing the default columns",
                        severity="warning", markup=False)
        self._mark_focus()
        self._watch()

    #: The focusable panes besides the table (which titles itself: its sort) and their titles.
    TITLES = {"#results-filter": "filter", "#figures-pane": "figures"}

    def on_descendant_focus(self) -> None:
        self._mark_focus()

    def on_descendant_blur(self) -> None:
        self._mark_focus()

    def _mark_focus(self) -> None:
        """The pane with the focus has :data:`FOCUS_MARK` before its title (issue 47: the
        screen never showed where the keys go without colours)."""
        for selector, title in self.TITLES.items():
            pane = self.query_one(selector)
            pane.border_title = f"{FOCUS_MARK}{title}" if pane.has_focus else title
        self.query_one(GroupTable).retitle()

    # -- the loading worker (no widget access) --------------------------------------------
    @work(thread=True, exclusive=True, group="results")
    def _watch(self) -> None:
        from engine.errors import FugueError
        from engine.results.load import load_runs
        from fugue_tui.app.models.results import analyse

        worker = get_current_worker()
        files = result_files(self.source)
        seen: tuple[Signature, str] | None = None  # the files and the filter last loaded
        loaded: Signature | None = None  # the files last read
        runs: Runs | None = None
        version = 0
        while not worker.is_cancelled:
            signature = (files_signature(files), self.filter_text)
            if signature != seen:
                seen = signature
                version += 1
                try:
                    if runs is None or signature[0] != loaded:
                        runs, loaded = load_runs(self.source), signature[0]
                    analysis = analyse(runs, self.filter_text, self.n_boot)
                    self.post_message(ResultsLoaded(
                        runs, analysis.shown, analysis.results, "", analysis.filter_error,
                        version, analysis.sweep, analysis.ttb, analysis.speedup))
                except FugueError as exc:  # no results yet, a file that is not ours
                    runs = None
                    self.post_message(ResultsLoaded(error=str(exc), version=version))
            self._wake.wait(POLL_S)
            self._wake.clear()

    def on_results_loaded(self, message: ResultsLoaded) -> None:
        self.loads += 1
        header = self.query_one("#results-header", Static)
        charts = self.query_one(FigureCharts)
        if message.error or message.runs is None or message.shown is None \
                or message.results is None:
            header.update(Text(f"{self.source}: {message.error}", style="yellow"))
            charts.show_nothing()
            return
        self.runs, self.shown, self.results = message.runs, message.shown, message.results
        self._ttb, self._speedup = message.ttb, message.speedup
        header.update(header_text(self.source, self.runs, self.shown, self.filter_text,
                                  message.filter_error))
        for note in self.runs.notes:  # what the load left out, said once, not at every reload
            if note not in self._told:
                self._told.add(note)
                self.notify(note, severity="warning", markup=False)
        self._sync_table()
        charts.show(message.results, message.sweep)
        self._show_provenance()

    # -- table ----------------------------------------------------------------------------
    def _sync_table(self) -> None:
        if self.shown is None:
            return
        groups = self.shown.groups
        self._by_key = {row_key(r): r for r in groups.to_dict("records")}
        self.query_one(GroupTable).show(groups, self._ttb, self._speedup)

    def selected_key(self) -> str | None:
        return self.query_one(GroupTable).selected_key()

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort the rows by ``column`` (a :data:`COLUMNS` key)."""
        self.query_one(GroupTable).sort_by(column, reverse)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_provenance()

    def _show_provenance(self) -> None:
        key = self.selected_key()
        self.query_one(ProvenancePane).row = self._by_key.get(key) if key else None

    # -- actions --------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Apply the filter. A valid one hands the keys back to the table; an invalid one
        keeps them in the box, its error under it: the keys typed next are the correction,
        not the table's shortcuts (an ``e`` there opens the export)."""
        self.set_filter(event.value)
        error = parse_filter(event.value).error
        box = self.query_one("#results-filter", Input)
        box.set_class(bool(error), "-bad-filter")
        box.border_subtitle = error.split(";")[0] if error else ""  # whole in the header
        if not error:
            self.query_one("#groups", DataTable).focus()

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._wake.set()

    def action_focus_filter(self) -> None:
        """``/``: the filter box, focused at once (a priority binding: the keys typed
        right after ``/`` go to the box, not to the table's shortcuts). In the box ``/``
        is text."""
        box = self.query_one("#results-filter", Input)
        if self.focused is box:  # not box.has_focus: set by its queue, which may lag
            raise SkipAction
        self.set_focus(box)

    def action_pick_sort(self) -> None:
        """``o``: :class:`SortPicker`; the column picked sorts the rows (ascending; the
        sorted one again: reversed, as a header click)."""
        table = self.query_one(GroupTable)

        def picked(column: str | None) -> None:
            if column:
                self.sort_by(column)

        self.app.push_screen(SortPicker(table.sort_column, table.sort_reverse), picked)

    def action_pick_columns(self) -> None:
        """``c``: :class:`ColumnPicker`; the columns unchecked are hidden, and the choice
        saved for this user (:func:`~fugue_tui.app.models.results_columns.save_hidden`); a
        save that fails is said, the choice still applied here."""
        table = self.query_one(GroupTable)

        def picked(hidden: frozenset[str] | None) -> None:
            if hidden is None:
                return
            table.set_hidden(hidden)
            try:
                save_hidden(hidden)
            except FugueError as exc:
                self.notify(str(exc), severity="error", markup=False)

        self.app.push_screen(ColumnPicker(table.hidden), picked)

    def action_reverse_sort(self) -> None:
        table = self.query_one(GroupTable)
        self.sort_by(table.sort_column or COLUMNS[0][0], reverse=not table.sort_reverse)

    def action_export(self) -> None:
        default = str(Path("figures") / time.strftime("%Y%m%d_%H%M%S"))
        self.app.push_screen(PathScreen("Write the figures (PNG, SVG) and the LaTeX table "
                                        "of the rows shown to the folder:", default,
                                        arm_s=EXPORT_ARM_S),
                             self._export_to)

    def _export_to(self, folder: str | None) -> None:
        if folder and self.shown is not None:
            self._export(self.shown, folder)

    def _export(self, runs: Runs, folder: str, overwrite: bool = False) -> None:
        self._exporter.start(runs, folder, overwrite)

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity, markup=False)

    def action_copy_key(self) -> None:
        """``y``: the selected row's cell key to the clipboard, and shown."""
        row = self._by_key.get(self.selected_key() or "")
        if row is None or not row.get("cell_key"):
            self.notify("no row with a cell key selected: nothing to copy", markup=False)
            return
        copy_shown(self, str(row["cell_key"]), "cell key")

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()

    def filter_applied(self) -> Filter:
        return parse_filter(self.filter_text)
