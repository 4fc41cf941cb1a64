"""A DataTable that repaints every row when new rows widened its columns.

DataTable measures new rows when idle; a paint before that (another widget's repaint)
caches their lines at the old widths, in caches whose keys do not hold the widths, and
only the next ``update_cell`` anywhere would invalidate them (Textual 8.2.8): rows drawn
with columns narrower than their header or their longest value, cut. The cell table of the
run screen had it first; the Results screen's group table showed it at 100x30 (a snapshot
that differed from run to run)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable


class FittedTable(DataTable):
    """A :class:`DataTable` whose rows are repainted at the new widths when they change."""

    def watch_virtual_size(self, old: Any, new: Any) -> None:
        if old.width != new.width:
            self._clear_caches()  # DataTable's line, row and cell caches
            self.refresh()
