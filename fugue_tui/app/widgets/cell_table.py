"""The cell queue: one row per cell (experiment, executor, configuration, state, attempt,
elapsed, T_group, note), and one row per earlier attempt of a retried cell, under it.

:meth:`CellTable.sync` diffs the rows against what is on screen and updates only the cells
that changed (new rows are appended and the table re-sorted by cell then attempt), and
repaints only the rows it changed (``DataTable.update_cell`` alone repaints every visible
row). The running cell's elapsed time — the only value that changes with the clock alone —
ticks every second, the same value as the job pane's ``cell 0:15`` (it moved in 10 s steps
and disagreed with it: issue 47, item 8; one row repainted a second); state changes and
numbers appear at the next redraw.

Cursor moves are told apart: :meth:`select_cell` and the re-sort move it for the program,
anything else (keys, mouse) is the user's, which :meth:`take_user_moved` reports once (the
run screen then stops following the running cell).

| key | binding id | action |
|---|---|---|
| j, k, g, G | nav.* | vim-style moves beside the arrows |
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets.data_table import ColumnKey

from engine.observe.state import CampaignState, CellState
from fugue_tui.app.actions import Action, bindings
from fugue_tui.app.models.cells import COLUMNS, cell_row, history_rows
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK
from fugue_tui.app.widgets.fitted_table import FittedTable

_NAV = (
    Action("nav.down", "j", "cursor_down", "down", "move down", show=False),
    Action("nav.up", "k", "cursor_up", "up", "move up", show=False),
    Action("nav.top", "g", "scroll_top", "top", "first row", show=False),
    Action("nav.bottom", "G", "scroll_bottom", "bottom", "last row", show=False),
)
#: Shorter headers (the keys stay): at 80 columns the long ones pushed T_group off screen.
HEADERS = {"configuration": "config", "attempt": "try"}
#: Shorter still on a small terminal (80x24): with a ray cell's "fifo · pass 1" and
#: "running" the columns were 5 wider than the screen, a horizontal scrollbar took a row
#: and the note column was off screen (issue 47, item 5).
COMPACT_HEADERS = {"experiment": "exp"}


def _order(value: str) -> tuple[int, float]:
    index, _, attempt = str(value).partition("·")
    try:
        return int(index), float(attempt) if attempt else math.inf
    except ValueError:
        return 0, math.inf


class CellTable(FittedTable):
    """The campaign's cells; row keys are cell keys (``key#attempt`` for earlier attempts)."""

    BINDINGS = bindings(_NAV)
    # class defaults: DataTable.__init__ already refreshes and moves the cursor
    _rows_only = False
    _program_move = False
    _user_moved = False

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.border_title = "cells"  # the filter's title replaces it (set_title)
        self._shown: dict[str, tuple[Any, ...]] = {}
        #: Cell updates done by the last sync (how many table cells changed).
        self.last_updates = 0
        #: Rows repainted by syncs so far (tests read it).
        self.row_repaints = 0

    def on_mount(self) -> None:
        for name in COLUMNS:
            self.add_column(HEADERS.get(name, name), key=name)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False):
        if self._rows_only and not regions and not layout and not recompose:
            return self  # update_cell's whole-table repaint: sync repaints the rows it changed
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def set_compact(self, compact: bool) -> None:
        """Use the :data:`COMPACT_HEADERS` (or the usual ones): the column as wide as its
        new header and its widest value."""
        for name, short in COMPACT_HEADERS.items():
            column = self.columns.get(ColumnKey(name))
            label = short if compact else HEADERS.get(name, name)
            if column is None or column.label.plain == label:
                continue
            index = COLUMNS.index(name)
            values = (row[index] for row in self._shown.values())
            column.label = Text(label)
            column.content_width = max([cell_len(label), *(
                cell_len(v.plain if isinstance(v, Text) else str(v)) for v in values)])
            self._require_update_dimensions = True
            self._clear_caches()
            self.refresh(layout=True)

    def on_resize(self) -> None:
        """Keep the cursor's row in view at the new height (a live resize, a zoom cycle
        showing the table again): DataTable scrolls only when the cursor moves, and the
        followed running cell was off-screen until ``f`` (issue 47, item 5)."""
        self.call_after_refresh(self._scroll_cursor_into_view)

    def sync(self, state: CampaignState, now: float,
             keep: Callable[[CellState], bool] | None = None) -> int:
        """Bring the table in line with ``state``; returns the number of table cells
        written (0 when nothing changed). ``keep``: which cells show (a filter; None: all);
        the rows of the others are removed (only when that changes: a filter does not
        rebuild the rows that stay)."""
        wanted: dict[str, tuple[Any, ...]] = {}
        for cell in sorted(state.cells.values(), key=lambda c: c.index):
            if keep is not None and not keep(cell):
                continue
            wanted.update(history_rows(cell))
            wanted[cell.key] = cell_row(cell, now, state.state)
        updates = self._drop_rows([key for key in self._shown if key not in wanted])
        added = False
        changed: list[str] = []
        for key, row in wanted.items():
            old = self._shown.get(key)
            if old is None:
                self.add_row(*row, key=key)
                added = True
                updates += len(row)
            elif old != row:
                self._rows_only = True
                try:
                    for name, before, after in zip(COLUMNS, old, row, strict=False):
                        if before != after:
                            self.update_cell(key, name, after,
                                             update_width=self._wider(name, after))
                            updates += 1
                finally:
                    self._rows_only = False
                changed.append(key)
            self._shown[key] = row
        if added:  # new rows and a re-sort: the whole table repaints anyway
            selected = self.selected_row_key()
            self.sort("#", key=_order)
            if selected is not None:
                self._move(self.get_row_index(selected))
        else:
            for key in changed:
                self.refresh_row(self.get_row_index(key))
            self.row_repaints += len(changed)
        if updates:
            # DataTable keys its render caches by an update count: what an older count
            # cached is never read again, yet stayed up to the caches' caps (10 000 cells,
            # 1 000 lines), a heap each full garbage collection walked, growing with the
            # campaign (issue 47, item 2). Dropped at once.
            for cache in (self._row_render_cache, self._cell_render_cache, self._line_cache):
                cache.clear()
        self.last_updates = updates
        return updates

    def _drop_rows(self, keys: list[str]) -> int:
        """Remove the rows of ``keys`` (the filter hides them), keeping the cursor on its
        cell when that stays; returns the table cells removed."""
        if not keys:
            return 0
        selected = self.selected_row_key()
        # remove_row re-validates the cursor (clamped when its row went): the program's
        # move, not the user's (it stopped the following of the running cell)
        self._program_move = True
        try:
            for key in keys:
                self.remove_row(key)
                del self._shown[key]
        finally:
            self._program_move = False
        if selected in self._shown:
            self._move(self.get_row_index(selected))
        return len(keys) * len(COLUMNS)

    def set_title(self, title: str) -> None:
        """Show ``title`` on the pane's border, keeping the focus mark before it."""
        shown = str(self.border_title or "")
        wanted = (FOCUS_MARK if shown.startswith(FOCUS_MARK) else "") + title
        if wanted != shown:
            self.border_title = wanted

    def _wider(self, column: str, value: Any) -> bool:
        """Whether ``value`` needs ``column`` wider than it is (a longer note or state).
        Only then is the table asked to measure: DataTable re-measures every cell of the
        column when a value got narrower (a state going from running to done), which cost
        the dashboard a few % of a core on a 20-cell campaign."""
        plain = value.plain if isinstance(value, Text) else str(value)
        return cell_len(plain) > self.columns[ColumnKey(column)].content_width

    def _move(self, row: int) -> None:
        """Move the cursor for the program (not the user's choice)."""
        self._program_move = True
        try:
            self.move_cursor(row=row, animate=False)
        finally:
            self._program_move = False

    def watch_cursor_coordinate(self, old_coordinate: Coordinate,
                                new_coordinate: Coordinate) -> None:
        super().watch_cursor_coordinate(old_coordinate, new_coordinate)
        if old_coordinate.row != new_coordinate.row and not self._program_move:
            self._user_moved = True

    def take_user_moved(self) -> bool:
        """True once after the user moved the cursor to another row (keys, mouse)."""
        moved, self._user_moved = self._user_moved, False
        return moved

    def selected_row_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # an empty or resorting table: no selection yet
            return None

    def selected_cell_key(self) -> str | None:
        """The cell under the cursor (an earlier attempt's row selects its cell)."""
        key = self.selected_row_key()
        return key.split("#", 1)[0] if key else None

    def follow(self, cell_key: str | None) -> None:
        """Keep the cursor on ``cell_key``'s row (the running cell the screen follows;
        None: leave it where it is). A move for the program: not the user's choice."""
        if cell_key is not None and self.selected_cell_key() != cell_key:
            self.select_cell(cell_key)

    def select_cell(self, cell_key: str) -> None:
        """Put the cursor on ``cell_key``'s row (for the program: not the user's choice)."""
        if cell_key in self._shown:
            self._move(self.get_row_index(cell_key))
