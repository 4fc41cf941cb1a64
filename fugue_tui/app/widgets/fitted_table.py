"""A DataTable that repaints every row when new rows widened its columns.

DataTable measures new rows when idle; a paint before that (another widget's repaint)
caches their lines at the old widths, in caches whose keys do not hold the widths, and
only the next ``update_cell`` anywhere would invalidate them (Textual 8.2.8): rows drawn
with columns narrower than their header or their longest value, cut. The cell table of the
run screen had it first; the Results screen's group table showed it at 100x30 (a snapshot
that differed from run to run).

:func:`fit_widths` lays columns out to a table's width, free text giving way (the Results
screen's group table uses it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.widgets import DataTable


class FittedTable(DataTable):
    """A :class:`DataTable` whose rows are repainted at the new widths when they change."""

    def watch_virtual_size(self, old: Any, new: Any) -> None:
        if old.width != new.width:
            self._clear_caches()  # DataTable's line, row and cell caches
            self.refresh()


#: The fewest characters a free-text column is narrowed to (its header's, when shorter: a
#: header is never ellipsized below this, nor a value below its header's width).
FLOOR = 6


def ellipsize(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: cut with an ellipsis (``…``) when longer."""
    if len(text) <= width:
        return text
    return text[:max(0, width - 1)] + "…" if width > 0 else ""


def fit_widths(natural: Sequence[int], free: Sequence[bool], headers: Sequence[int],
               available: int, padding: int = 2) -> list[int]:
    """Column content widths that fit ``available`` cells (each column takes ``padding``
    more), the free-text columns giving way so that the others stay whole.

    ``natural``: each column's width shown whole (its header's or longest value's);
    ``free``: which are free text (ellipsized when narrowed); ``headers``: each header's
    width. When every column fits, ``natural``. Otherwise the free-text columns are capped
    at one width (the widest give way first), the widest cap with which every column up to
    the last not free one (the numbers) fits, none below its floor (its header's width, or
    :data:`FLOOR`, or its natural width when narrower); then the columns are laid on from
    the left while they fit (all of those numbers, unless even the floors leave them no
    room: a small terminal), the first that does not is narrowed into the room left (when a free one
    fits its floor there), and the rest of the room goes back to the narrowed columns shown,
    then widens the last one shown: the right
    edge falls between two columns, never through one (issue 47: a number cut at the edge
    reads as another number). What does not fit is reached by scrolling right."""
    n = len(natural)
    if sum(natural) + padding * n <= available:
        return list(natural)
    floors = [min(w, max(h, FLOOR)) if f else w
              for w, f, h in zip(natural, free, headers, strict=True)]
    fixed = [i for i in range(n) if not free[i]]
    last = fixed[-1] if fixed else -1

    def capped(cap: int) -> list[int]:
        return [max(fl, min(w, cap)) if f else w
                for w, f, fl in zip(natural, free, floors, strict=True)]

    def span(widths: list[int], upto: int) -> int:
        return sum(widths[:upto + 1]) + padding * (upto + 1)

    cap = max(natural)
    while cap > 0 and span(capped(cap), last) > available:
        cap -= 1
    widths = capped(cap)
    used, shown = 0, -1
    for i in range(n):  # the columns that fit whole, from the left
        room = available - used - padding
        if widths[i] <= room:
            used += widths[i] + padding
            shown = i
            continue
        if free[i] and room >= floors[i]:  # narrowed into the room left
            widths[i] = room
            used += room + padding
            shown = i
        break
    if 0 <= shown < n - 1 and used < available:  # the next column starts at the edge
        # the room left back to the narrowed columns shown, then to the last one shown
        spare = available - used
        short = [i for i in range(shown + 1) if widths[i] < natural[i]]
        while spare and short:
            for i in sorted(short, key=lambda i: widths[i]):
                if spare and widths[i] < natural[i]:
                    widths[i] += 1
                    spare -= 1
            short = [i for i in short if widths[i] < natural[i]]
        widths[shown] += spare
    return widths
