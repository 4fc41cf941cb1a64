"""Searching a pane's lines: which lines match, the next or previous one around the ends,
and the count shown beside the search line (``3/17``). Textual-free: the run screen's
search (:mod:`fugue_tui.app.screens.run_search`) applies it to the log and events panes.

A match is a *line* containing the query, case-insensitively (``n`` moves a line at a
time, as in ``less``); a pane whose lines scroll out or are replaced is searched again at
each move, so the positions are line indices of the lines as they are then.
"""

from __future__ import annotations

from collections.abc import Sequence


def matching(lines: Sequence[str], query: str) -> list[int]:
    """The indices of ``lines`` containing ``query`` (case-insensitive), in order; none
    for an empty query."""
    if not query:
        return []
    folded = query.casefold()
    return [i for i, line in enumerate(lines) if folded in line.casefold()]


def step(matches: Sequence[int], current: int | None, forward: bool = True) -> int | None:
    """The match after ``current`` (a line index; None: before the first line), or before
    it when not ``forward``; past the last match the first, before the first the last
    (the search wraps around). None when there is no match."""
    if not matches:
        return None
    if forward:
        if current is None:
            return matches[0]
        return next((m for m in matches if m > current), matches[0])
    if current is None:
        return matches[-1]
    return next((m for m in reversed(matches) if m < current), matches[-1])


def nearest(matches: Sequence[int], current: int | None) -> int | None:
    """The match at or after ``current`` (the first when none is): where a search that is
    being typed stays while the query still matches its line."""
    if current is not None and current in matches:
        return current
    return step(matches, None if current is None else current - 1)


def count_label(matches: Sequence[int], current: int | None) -> str:
    """``3/17`` (the current match's rank, the matches), ``0/0`` with none, ``-/17`` when
    the current line is not a match (the lines changed under it)."""
    if not matches:
        return "0/0"
    if current is not None and current in matches:
        return f"{list(matches).index(current) + 1}/{len(matches)}"
    return f"-/{len(matches)}"
