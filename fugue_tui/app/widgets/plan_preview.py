"""The plan screen's preview pane: a summary line (the cells, or what stops the plan) over
a table of the cells the runner would run, with why it would skip each one that it would
not (the runner's dry run: :func:`fugue_tui.app.models.plan.preview`).

The pane previews the plan of the settings form it is given: :meth:`PlanPreview.schedule`
after every edit recomputes the runner's dry run in a thread worker once the edits pause
for :data:`PREVIEW_DEBOUNCE_S`, and drops a result that an edit made stale (each edit is a
new revision).

What it shows is three reactive attributes, each redrawing the pane when it changes:
``result`` (the preview; None while one is being computed), ``load_error`` (why the last
campaign file could not be loaded, set by the screen: it wins over everything, as the plan
on screen is not the file's) and ``form_error`` (a setting that does not parse: no preview
can be computed until it is corrected).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import DataTable, Static

from fugue_tui.app.messages import PreviewReady, PreviewShown, Severity
from fugue_tui.app.models.cells import split_label
from fugue_tui.app.models.plan import PlanDoc, Preview, preview
from fugue_tui.format import PENDING

if TYPE_CHECKING:
    from fugue_tui.app.widgets.campaign_form import CampaignForm

#: Seconds of quiet after an edit before the preview is recomputed.
PREVIEW_DEBOUNCE_S = 0.25

#: The preview table's columns (also their keys), in order.
#: The width of a cell key (16 hex digits of its hash: engine.define.matrix).
KEY_WIDTH = 16
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

    def __init__(self, form: CampaignForm, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.form = form
        #: The plan's edit count, and the edit the preview shown was computed for.
        self.revision = 0
        self.result_revision = -1
        self._debounce: Timer | None = None

    @property
    def pending(self) -> bool:
        """True while the preview shown is older than the plan (an edit is being previewed)."""
        return self.result_revision != self.revision

    def schedule(self) -> None:
        """The plan changed: recompute the preview after :data:`PREVIEW_DEBOUNCE_S` of
        quiet (a load error shown is cleared: the plan on screen is now the user's)."""
        self.load_error = ""
        self.show_form_error()
        self.revision += 1
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(PREVIEW_DEBOUNCE_S, self._start)

    def launch_refusal(self) -> tuple[str, Severity] | None:
        """Why the plan cannot be launched now, and how loud to say it; None: it can (it
        parses, its preview is current and without error, and some cell would run)."""
        if self.form.errors:
            return next(iter(self.form.errors.values())), "error"
        result = self.result
        if result is None or result.error or self.pending:
            return (result.error if result and result.error
                    else "the preview is not ready yet"), "error"
        if not result.runs:
            return "nothing to run: every cell would be skipped", "warning"
        return None

    def show_form_error(self) -> None:
        """The form's first setting that does not parse, in the summary."""
        self.form_error = next(iter(self.form.errors.values()), "")

    def _start(self) -> None:
        if self.form.errors:
            self.result = None
            return
        self._compute(copy.deepcopy(self.form.doc), self.revision, self.form.resume)

    @work(thread=True, exclusive=True, group="preview")
    def _compute(self, doc: PlanDoc, revision: int, resume: bool) -> None:
        self.post_message(PreviewReady(preview(doc, resume=resume), revision))

    def on_preview_ready(self, message: PreviewReady) -> None:
        if message.revision != self.revision:
            return  # an edit came after this preview started
        self.result_revision = message.revision
        self.result = message.preview
        self.post_message(PreviewShown(message.preview))

    def compose(self) -> ComposeResult:
        yield Static("", id="preview-summary")
        yield DataTable(id="preview", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#preview", DataTable)
        for column in COLUMNS:
            # A cell key is always 16 hex digits: a fixed width, not one measured when the
            # table next idles (on a loaded host the column stayed at its header's 8
            # characters, cutting every key, for as long as the idle did not come)
            table.add_column(column, key=column,
                             width=KEY_WIDTH if column == "cell key" else None)

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
        if result.stream:
            text.append(f"\n{result.stream}", style="cyan")
        for warning in result.warnings:
            text.append(f"\nwarning: {warning}", style="yellow")
        return text
