"""The run screen's search (``/``, issue 48 item 2): a query line above the footer, the
matches highlighted in the pane searched, the pane moved to the current match, ``n``/``N``
to the next and previous one (around the ends), the count beside the line (``3/17``),
Escape to close.

The pane searched is the log, or the events pane when it has the keys (``4``, Tab) or is
zoomed to (``z``). Which lines match is :mod:`fugue_tui.app.search`'s; the panes draw the
marks (:meth:`LogPane.mark <fugue_tui.app.widgets.log_pane.LogPane.mark>`,
:meth:`RecentLines.mark <fugue_tui.app.widgets.recent_lines.RecentLines.mark>`).

A mixin of :class:`~fugue_tui.app.screens.run.RunScreen` (its actions are the screen's:
``search_open``, ``search_next``, ``search_previous``, ``search_close``). The keys ``n``
and Escape are also the replay's step and the screen's back: which applies is
:meth:`RunSearch.search_applies`'s (the screen's ``check_action`` asks it), the search's
while one is open, the others' otherwise (the footer then shows those, in their places).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.actions import SkipAction
from textual.css.query import NoMatches
from textual.screen import Screen

from fugue_tui.app.screens.run_layout import zoom_to, zoomed
from fugue_tui.app.search import count_label, matching, nearest, step
from fugue_tui.app.widgets.footer import KeyFooter
from fugue_tui.app.widgets.log_pane import LogPane
from fugue_tui.app.widgets.recent_lines import RecentLines
from fugue_tui.app.widgets.search_line import SearchLine

#: The panes searched (their ids), by the name the search line shows.
PANES = {"log": "log", "events": "recent"}


class RunSearch(Screen):
    """The search's state and actions (mixed into the run screen)."""

    #: The line (an index of the searched pane's lines) the search is at (None: none yet).
    search_at: int | None = None

    # -- what is searched -----------------------------------------------------------------
    def search_line(self) -> SearchLine | None:
        """The open search line, if any."""
        try:
            return self.query_one(SearchLine)
        except NoMatches:
            return None

    def _searched(self, line: SearchLine) -> LogPane | RecentLines:
        pane = self.query_one(f"#{PANES[line.target]}")
        assert isinstance(pane, (LogPane, RecentLines))
        return pane

    def _lines(self, line: SearchLine) -> Sequence[str]:
        return self._searched(line).lines

    def _show(self, line: SearchLine, at: int | None) -> None:
        """Put the search at line ``at`` (None: no match) and redraw the marks and count."""
        query = line.query_box.value
        self.search_at = at
        self._searched(line).mark(query, at)
        line.show_count(count_label(matching(self._lines(line), query), at) if query else "")

    def search_applies(self, action: str) -> bool:
        """Whether ``action`` applies now, as far as the search is concerned: n, N and
        Escape's search actions only while a search is open, the replay's step (n) and
        back (Escape) only while none is (Textual runs the first binding of a key that
        applies; the footer shows it)."""
        if action in ("search_next", "search_previous", "search_close"):
            return self.search_line() is not None
        if action in ("step", "back"):
            return self.search_line() is None
        return True

    # -- the actions ----------------------------------------------------------------------
    async def action_search_open(self) -> None:
        """Open the search line on the log or the events (see the module docstring), or
        give the keys back to an open one; "/" typed in the query is text."""
        line = self.search_line()
        if line is not None:
            if line.query_box.has_focus:
                raise SkipAction()  # the query's own "/"
            line.query_box.focus()
            return
        events = self.query_one(RecentLines).has_focus or zoomed(self) == "events"
        target = "events" if events else "log"
        if zoomed(self) not in ("", target):  # the pane searched must show
            zoom_to(self, "")
        self.search_at = None
        line = SearchLine(target, id="search-line")
        await self.mount(line, before=self.query_one(KeyFooter))
        line.query_box.focus()  # before the next key: "/" is a priority binding
        line.show_count("")
        self.refresh_bindings()  # Escape closes the search now

    def on_search_line_typed(self, message: SearchLine.Typed) -> None:
        """Each key typed: the first match at or after where the search is."""
        line = self.search_line()
        if line is not None:
            self._show(line, nearest(matching(self._lines(line), message.query),
                                     self.search_at))

    def on_search_line_kept(self, message: SearchLine.Kept) -> None:
        """Enter: the keys back to the pane searched (n/N move, Escape closes)."""
        line = self.search_line()
        if line is not None:
            self._searched(line).focus()

    def _move(self, forward: bool) -> None:
        line = self.search_line()
        if line is None or not line.query_box.value:
            raise SkipAction()  # no search: the key's other action (replay's step)
        matches = matching(self._lines(line), line.query_box.value)
        self._show(line, step(matches, self.search_at, forward))

    def action_search_next(self) -> None:
        self._move(True)

    def action_search_previous(self) -> None:
        self._move(False)

    async def action_search_close(self) -> None:
        """Escape: close the search, clear its marks (the events pane shows its newest
        lines again), the keys to the pane searched."""
        line = self.search_line()
        if line is None:
            raise SkipAction()  # no search: Escape is the screen's back
        pane = self._searched(line)
        had_keys = line.query_box.has_focus
        pane.mark("", None)
        self.search_at = None
        await line.remove()
        if had_keys:
            pane.focus()
        self.refresh_bindings()  # Escape is back's again
