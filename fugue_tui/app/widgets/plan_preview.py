"""The plan screen's preview pane: a summary line (the cells, or what stops the plan) over
a table of the cells the runner would run, with why it would skip each one that it would
not (the runner's dry run: :func:`fugue_tui.app.models.plan.preview`).

What it shows is three reactive attributes the screen sets, each redrawing the pane when it
changes: ``result`` (the preview; None while one is being computed), ``load_error`` (why
the last campaign file could not be loaded: it wins over everything, as the plan on screen
is not the file's) and ``form_error`` (a setting that does not parse: no preview can be
computed until it is corrected).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import DataTable, Static

from fugue_tui.app.models.cells import split_label
from fugue_tui.format import PENDING

if TYPE_CHECKING:
    from fugue_tui.app.models.plan import Preview

#: The preview table's columns (also their keys), in order.
COLUMNS = ("#", "experiment", "executor", "configuration", "pass", "jobs", "cell key", "would")


class PlanPreview(Vertical):
    """See the module docstring. Its summary is ``#preview-summary``, its table ``#preview``
    (one row per cell, keyed by the cell key)."""

    # None of them is drawn at mount (``init=False``): the pane stays blank until the screen
    # has something to say, as it always did.

    #: The preview shown; None while one is being computed. Set again after every preview
    #: (``always_update``): a preview equal to the last still redraws, and comparing two
    #: plans cell by cell would cost more than the redraw.
    result: var[Preview | None] = var(None, init=False, always_update=True)
    #: Why the last campaign file could not be loaded; ``""``: it loaded (or none was).
    load_error = var("", init=False)
    #: The first setting that does not parse (one line), ``""``: none.
    form_error = var("", init=False)

    def compose(self) -> ComposeResult:
        yield Static("", id="preview-summary")
        yield DataTable(id="preview", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#preview", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)

    def watch_result(self, result: Preview | None) -> None:
        if result is not None:  # while one is computed the last one's cells stay
            self._fill(result)
        self._show_summary()

    def watch_load_error(self) -> None:
        self._show_summary()

    def watch_form_error(self) -> None:
        self._show_summary()

    def _fill(self, result: Preview) -> None:
        table = self.query_one("#preview", DataTable)
        table.clear()
        for planned in result.cells:
            cell = planned.cell
            _, _, config, _ = split_label(cell.label)
            would = Text(f"skip: {planned.skip}", style="yellow") if planned.skip else Text("run")
            table.add_row(str(cell.index), cell.exp_id, cell.executor, config or PENDING,
                          str(cell.pass_index), str(len(cell.jobs)), cell.key, would,
                          key=cell.key)

    def _show_summary(self) -> None:
        summary = self.query_one("#preview-summary", Static)
        summary.set_class(bool(self.load_error), "-load-error")
        summary.update(self._summary())

    def _summary(self) -> Text:
        result = self.result
        if self.load_error:
            return Text(f"not loaded: {self.load_error}", style="bold red")
        if self.form_error:
            return Text(self.form_error, style="bold red")
        if result is None:
            return Text("preview: computing…", style="dim")
        if result.error:
            return Text(f"preview: {result.error}", style="bold red")
        text = Text(f"preview: {result.summary()}", style="bold")
        text.append("  ·  ctrl+r launch · ctrl+s save · ctrl+o load", style="dim")
        for warning in result.warnings:
            text.append(f"\nwarning: {warning}", style="yellow")
        return text
