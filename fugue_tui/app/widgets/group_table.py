"""The Results screen's group table: one row per group row shown (its cells as
:func:`fugue_tui.app.models.results.table_rows` writes them, keyed by
:func:`~fugue_tui.app.models.results.row_key`), sorted by one column, the selection kept
across reloads and sorts. A header click sorts by that column (again: reversed). Its border
title says ``rows`` and the sort, marked ``> `` while the table has the focus.

The columns are laid out to the table's width (:func:`~fugue_tui.app.widgets.fitted_table.
fit_widths`): the free-text columns give way, their values ellipsized, so that the numbers
are whole and the right edge never cuts a column (issue 47); the rest is reached by
scrolling right. The rows are sorted on their whole texts, not the ellipsized ones.

Only the columns shown are laid out: :attr:`GroupTable.hidden` (the Results screen's ``c``,
:mod:`fugue_tui.app.models.results_columns`) leaves columns out of the table and out of the
fitting, so the width they took goes to the others. A hidden column still sorts (``o``
lists every column); the title says how many are hidden.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.text import Text
from textual import events
from textual.widgets import DataTable

from fugue_tui.app.models.results import COLUMNS, NUMERIC, sort_value, table_rows
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK
from fugue_tui.app.widgets.fitted_table import FittedTable, ellipsize, fit_widths


class GroupTable(FittedTable):
    """See the module docstring. ``sort_column``: a :data:`COLUMNS` key (``""``: load
    order), ``sort_reverse``: descending; ``hidden``: the columns left out at first."""

    def __init__(self, hidden: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        super().__init__(id=kwargs.pop("id", "groups"), cursor_type="row", zebra_stripes=True,
                         **kwargs)
        self.sort_column = ""
        self.sort_reverse = False
        #: The rows shown: row key → cells, whole (a reload that changes none leaves the
        #: table be).
        self._rows: dict[str, tuple[str, ...]] = {}
        #: The columns left out of the table (:data:`COLUMNS` keys; :meth:`set_hidden`).
        self.hidden: frozenset[str] = frozenset(hidden)
        #: The columns' widths as laid out (empty: not yet).
        self._widths: list[int] = []
        #: The columns laid out (their :data:`COLUMNS` positions) with those widths.
        self._laid_out: list[int] = []

    def on_mount(self) -> None:
        self._layout()
        self.retitle()

    def on_resize(self, event: events.Resize) -> None:
        if self._fit() != self._widths or self.shown_columns() != self._laid_out:
            self._layout()

    def retitle(self) -> None:
        """``rows · sorted by …``, marked while the table has the focus (a capture without
        colours shows where the keys go by that mark alone); its screen calls it when the
        focus moves."""
        sort = f" · sorted by {self.sort_column} {'↓' if self.sort_reverse else '↑'}" \
            if self.sort_column else ""
        hidden = len(self.hidden)
        cols = f" · {hidden} column{'s' if hidden != 1 else ''} hidden (c)" if hidden else ""
        self.border_title = f"{FOCUS_MARK if self.has_focus else ''}rows{sort}{cols}"

    def shown_columns(self) -> list[int]:
        """The positions in :data:`COLUMNS` of the columns shown, in order."""
        return [i for i, (key, _, _) in enumerate(COLUMNS) if key not in self.hidden]

    def set_hidden(self, hidden: frozenset[str]) -> None:
        """Leave the columns ``hidden`` (:data:`COLUMNS` keys) out of the table; the rest
        laid out again to the width, the selected row and the sort kept."""
        if hidden == self.hidden:
            return
        self.hidden = frozenset(hidden)
        self._layout()
        self.retitle()

    def show(self, groups: pd.DataFrame, ttb: dict[str, float],
             speedup: dict[str, float] | None = None) -> None:
        """Show the group rows ``groups`` (``ttb``: row key → time-to-best speedup,
        ``speedup``: row key → T_group speedup), sorted as before, the selected row still
        selected when it is among them."""
        wanted = table_rows(groups, ttb, speedup)
        if list(wanted) == list(self._rows) and wanted == self._rows:
            return
        self._rows = wanted
        self._layout()

    def selected_key(self) -> str | None:
        """The row key under the cursor, None when there is none."""
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # an empty or resorting table
            return None

    def _fit(self) -> list[int]:
        """The columns' widths for the rows shown at the table's present width, less the
        vertical scroll bar when the rows will need one (the bar's 2 columns left empty
        otherwise would show the next column's first characters)."""
        shown = self.shown_columns()
        natural = [max([len(COLUMNS[i][1])] + [len(cells[i]) for cells in self._rows.values()])
                   for i in shown]
        region = self.content_region
        if region.width <= 0:
            return natural
        free = [COLUMNS[i][0] not in NUMERIC for i in shown]
        headers = [len(COLUMNS[i][1]) for i in shown]
        padding = 2 * self.cell_padding
        lines = len(self._rows) + (self.header_height if self.show_header else 0)
        bar = self.styles.scrollbar_size_vertical
        widths = natural
        for _ in range(2):  # a horizontal bar takes a line, which may call for the other bar
            wide = sum(widths) + padding * len(widths) > region.width - bar
            tall = lines > region.height - (self.styles.scrollbar_size_horizontal if wide else 0)
            widths = fit_widths(natural, free, headers, region.width - (bar if tall else 0),
                                padding)
        return widths

    def _order(self) -> list[str]:
        """The row keys in the sort's order (load order unsorted), on the whole texts,
        missing values last."""
        keys = list(self._rows)
        if not self.sort_column:
            return keys
        at = [k for k, _, _ in COLUMNS].index(self.sort_column)
        values = {k: sort_value(self.sort_column, self._rows[k][at]) for k in keys}
        # missing values last either way (a reversed sort is of the values, not of "—")
        present = sorted((k for k in keys if values[k][0] == 0), key=values.__getitem__,
                         reverse=self.sort_reverse)
        return present + [k for k in keys if values[k][0] != 0]

    def _layout(self) -> None:
        """(Re)build the columns at the widths that fit and the rows in the sort's order,
        ellipsized to them, the selected row and the horizontal scroll kept."""
        selected, scroll_x = self.selected_key(), self.scroll_x
        shown = self.shown_columns()
        widths = self._fit()
        if widths != self._widths or shown != self._laid_out:
            self.clear(columns=True)
            for at, width in zip(shown, widths, strict=True):
                key, header, _ = COLUMNS[at]
                self.add_column(Text(ellipsize(header, width)), width=width, key=key)
            self._widths, self._laid_out = widths, shown
        else:
            self.clear()
        for key in self._order():
            cells = self._rows[key]
            self.add_row(*(Text(ellipsize(cells[at], width), no_wrap=True, end="")
                           for at, width in zip(shown, widths, strict=True)),
                         key=key)
        if selected in self._rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
        if scroll_x:
            self.scroll_to(x=scroll_x, animate=False, immediate=True)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort the rows by ``column`` (a :data:`COLUMNS` key); ``reverse`` None: ascending,
        or the other way round when already sorted by it."""
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        self._layout()
        self.retitle()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))
