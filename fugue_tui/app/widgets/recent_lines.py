"""The run screen's events pane: the newest lifecycle lines of the campaign
(:attr:`fugue_tui.live.view.LiveView.recent`) that fit the pane, wrapped to its width,
oldest at the top (the pane used to show the oldest and cut the newest one or two).

A busy-host warning (:func:`engine.measure.host.busy_warning`, with the busiest other
processes) is one row there, cut at the pane's edge (it wrapped to 3-4 rows, and on a busy
machine every cell has one, pushing the lifecycle off the pane); in full when the events
pane is zoomed (``z``) and under the selected cell in the jobs pane."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from fugue_tui.app.widgets.log_pane import MATCH_STYLE

#: The busy-host warning's text (engine.measure.host.busy_warning, then the busiest other
#: processes engine.cell.rows.load_warnings appends), as a recent line carries it.
_BUSY = re.compile(r"warning: host load average (?P<load>\S+) on (?P<cores>\d+) cores: "
                   r"the machine was busy(?:; busiest other processes: (?P<who>.*))?$")


def brief(line: str) -> str | None:
    """``line`` shortened for one row when it is a busy-host warning, else None::

        08:00:25 E1 seq: host busy, load 9.2 on 2 cores; busiest: python (pid 12) 95 %, …
    """
    found = _BUSY.search(line)
    if found is None:
        return None
    who = found["who"]
    return (f"{line[:found.start()]}host busy, load {found['load']} on {found['cores']} cores"
            + (f"; busiest: {who}" if who else ""))


def recent_text(lines: list[str] | tuple[str, ...], width: int, height: int,
                console: Console, full: bool = False, query: str = "") -> Text:
    """The tail of ``lines`` that fills ``height`` rows of ``width`` columns once wrapped
    (all of them before the pane has a size); a busy-host warning takes one row (cut at
    ``width``, :func:`brief`) unless ``full``; ``query`` (a search) highlighted."""
    if not lines:
        return Text("no lifecycle events yet", style="dim")
    if width < 1 or height < 1:
        return Text("\n".join(lines))
    rows: list[Text] = []
    for line in reversed(lines):
        short = None if full else brief(line)
        if short is not None:
            row = _marked(short, query)
            row.truncate(width, overflow="ellipsis")
            wrapped = [row]
        else:
            wrapped = list(_marked(line, query).wrap(console, width))
        if len(rows) + len(wrapped) > height:
            if not rows:  # one line taller than the pane: its end, the newest words
                rows = wrapped[-height:]
            break
        rows = wrapped + rows
    return Text("\n").join(rows)


def _marked(line: str, query: str) -> Text:
    text = Text(line)
    if query:
        text.highlight_words([query], MATCH_STYLE, case_sensitive=False)
    return text


class RecentLines(Static):
    """The recent lifecycle lines, laid out at paint time for the pane's size then (the
    newest that fit, :func:`recent_text`): laid out when they changed, a pane that the
    layout resized afterwards (the header grows a row when a device appears) kept rows
    sized for its old height, and clipped the newest line at the bottom.

    :attr:`lines` is reactive: assigning other lines repaints the pane (no layout pass: its
    size is the layout's), the same lines do nothing."""

    lines: reactive[tuple[str, ...]] = reactive((), layout=False, repaint=True)
    #: A search (the run screen's ``/``): the query highlighted, and the line (an index of
    #: :attr:`lines`) the pane ends at instead of the newest (None: the newest).
    search_query: reactive[str] = reactive("", layout=False, repaint=True)
    search_anchor: reactive[int | None] = reactive(None, layout=False, repaint=True)
    #: Focusable, so that ``4`` and Tab give it the keys (``/`` then searches it); its
    #: title shows only then (``> events``), as the other panes mark the focus.
    can_focus = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)

    def render(self) -> Text:
        size = self.content_size
        # zoomed to (z), the pane shows each line in full: the details of a shortened one
        full = self.screen.has_class("-zoom-events")
        anchor = self.search_anchor
        lines = self.lines if anchor is None else self.lines[:anchor + 1]
        return recent_text(lines, size.width, size.height, self.app.console, full,
                           self.search_query)

    def mark(self, query: str, line: int | None) -> None:
        """Highlight ``query`` ("": none) and end the pane at ``line`` (None: the newest
        lines again), as :meth:`LogPane.mark <fugue_tui.app.widgets.log_pane.LogPane.mark>`."""
        self.search_query, self.search_anchor = query, line
