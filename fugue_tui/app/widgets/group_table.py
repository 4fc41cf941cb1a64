"""The Results screen's group table: one row per group row shown (its cells as
:func:`fugue_tui.app.models.results.table_rows` writes them, keyed by
:func:`~fugue_tui.app.models.results.row_key`), sorted by one column, the selection kept
across reloads and sorts. A header click sorts by that column (again: reversed). Its border
title says ``rows`` and the sort, marked ``> `` while the table has the focus.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from textual.widgets import DataTable

from fugue_tui.app.models.results import COLUMNS, sort_value, table_rows
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK
from fugue_tui.app.widgets.fitted_table import FittedTable


class GroupTable(FittedTable):
    """See the module docstring. ``sort_column``: a :data:`COLUMNS` key (``""``: load
    order), ``sort_reverse``: descending."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(id=kwargs.pop("id", "groups"), cursor_type="row", zebra_stripes=True,
                         **kwargs)
        self.sort_column = ""
        self.sort_reverse = False
        #: The rows shown: row key → cells (a reload that changes none leaves the table be).
        self._rows: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        for key, header, _ in COLUMNS:
            self.add_column(header, key=key)
        self.retitle()

    def retitle(self) -> None:
        """``rows · sorted by …``, marked while the table has the focus (a capture without
        colours shows where the keys go by that mark alone); its screen calls it when the
        focus moves."""
        sort = f" · sorted by {self.sort_column} {'↓' if self.sort_reverse else '↑'}" \
            if self.sort_column else ""
        self.border_title = f"{FOCUS_MARK if self.has_focus else ''}rows{sort}"

    def show(self, groups: pd.DataFrame, ttb: dict[str, float],
             speedup: dict[str, float] | None = None) -> None:
        """Show the group rows ``groups`` (``ttb``: row key → time-to-best speedup,
        ``speedup``: row key → T_group speedup), sorted as before, the selected row still
        selected when it is among them."""
        wanted = table_rows(groups, ttb, speedup)
        if list(wanted) == list(self._rows) and wanted == self._rows:
            return
        selected = self.selected_key()
        if set(wanted) != set(self._rows) or any(wanted[k] != self._rows[k] for k in wanted):
            self.clear()
            for key, cells in wanted.items():
                self.add_row(*cells, key=key)
        self._rows = wanted
        self._apply_sort()
        if selected in wanted:
            self.move_cursor(row=self.get_row_index(selected), animate=False)

    def selected_key(self) -> str | None:
        """The row key under the cursor, None when there is none."""
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # an empty or resorting table
            return None

    def _apply_sort(self) -> None:
        if not self.sort_column:
            return
        key = self.sort_column
        self.sort(key, key=lambda text: sort_value(key, str(text)), reverse=self.sort_reverse)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort the rows by ``column`` (a :data:`COLUMNS` key); ``reverse`` None: ascending,
        or the other way round when already sorted by it."""
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        selected = self.selected_key()
        self._apply_sort()
        if selected is not None:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
        self.retitle()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))
