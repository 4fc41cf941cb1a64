"""The Results screen's column picker (``c``, binding id ``results.columns``): a checklist
of the table's columns. Space toggles the one highlighted, Enter applies, ``d`` checks every
column again (the defaults; Enter then applies them), Escape leaves the columns as they
were. The key columns (:data:`~fugue_tui.app.models.results_columns.KEY_COLUMNS`) are
listed checked and disabled: they always show.

The screen applies and saves the choice
(:meth:`fugue_tui.app.screens.results.ResultsScreen.action_pick_columns`;
:mod:`fugue_tui.app.models.results_columns` holds the file).

| key | binding id | action |
|---|---|---|
| space | (the list's own) | show or hide the column highlighted |
| enter | columns.apply | apply and save the choice |
| d | columns.defaults | check every column (the defaults) |
| escape | columns.cancel | leave the columns as they were |
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList
from textual.widgets.selection_list import Selection

from fugue_tui.app.models.results import COLUMNS
from fugue_tui.app.models.results_columns import DEFAULT_HIDDEN, KEY_COLUMNS, clean


class ColumnPicker(ModalScreen[frozenset[str] | None]):
    """See the module docstring. ``hidden``: the columns hidden now; dismissed with the
    columns to hide (a frozenset of :data:`~fugue_tui.app.models.results.COLUMNS` keys), or
    None when cancelled."""

    # enter: a priority binding, as the list's own Enter toggles like Space
    BINDINGS = [Binding("enter", "apply", "apply", priority=True, id="columns.apply"),
                Binding("d", "defaults", "defaults", id="columns.defaults"),
                Binding("escape", "cancel", "cancel", id="columns.cancel")]

    def __init__(self, hidden: frozenset[str]) -> None:
        super().__init__()
        self.hidden = clean(hidden)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="columns"):
            yield Label("Columns shown (space toggles, enter applies, d: all again, esc "
                        f"cancels; {' and '.join(KEY_COLUMNS)} always show):", id="question")
            yield SelectionList[str](*(self._selection(key, header)
                                       for key, header, _ in COLUMNS), id="column-list")

    def _selection(self, key: str, header: str) -> Selection[str]:
        if key in KEY_COLUMNS:
            return Selection(f"{self._label(key, header)}  (always shown)", key, True,
                             id=key, disabled=True)
        shown = key not in self.hidden
        return Selection(self._prompt(key, header, shown), key, shown, id=key)

    @staticmethod
    def _label(key: str, header: str) -> str:
        return header if header == key else f"{header}  ({key})"

    def _prompt(self, key: str, header: str, shown: bool) -> str:
        """The column's line: its header (its key when that differs), ``hidden`` after an
        unchecked one: the box's check is told by its colour alone, which a capture without
        colours (or a colour-blind user) does not see."""
        label = self._label(key, header)
        return label if shown else f"{label}  · hidden"

    def on_selection_list_selected_changed(
            self, event: SelectionList.SelectedChanged[str]) -> None:
        checked = set(event.selection_list.selected)
        for key, header, _ in COLUMNS:
            if key not in KEY_COLUMNS:
                event.selection_list.replace_option_prompt(
                    key, self._prompt(key, header, key in checked))

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def chosen(self) -> frozenset[str]:
        """The columns unchecked in the list now."""
        checked = set(self.query_one(SelectionList).selected)
        return clean(key for key, _, _ in COLUMNS if key not in checked)

    def action_apply(self) -> None:
        self.dismiss(self.chosen())

    def action_defaults(self) -> None:
        columns = self.query_one(SelectionList)
        for key, _, _ in COLUMNS:
            if key in DEFAULT_HIDDEN:
                columns.deselect(key)
            else:
                columns.select(key)

    def action_cancel(self) -> None:
        self.dismiss(None)
