"""The selected cell attempt's ``cell.log``, followed as it grows.

The file is read by the run screen's follow worker (:class:`LogTail`, no widget access);
the widget only receives lines through messages.

The pane's size is the layout's (a share of the run screen), never its content's: new lines
change only what it scrolls over. Textual's ``Log`` asks for a layout of the whole screen at
each write and clear (its virtual size is a layout reactive), three or four per cell of a
campaign, 6-9 ms each; :class:`LogPane` updates its scroll bars instead
(issue 47, item 2: the dashboard's own CPU).
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.highlighter import Highlighter
from rich.text import Text
from textual.geometry import Region
from textual.widgets import Log

from fugue_tui.app.actions import SCROLL_NAV, bindings

#: Bytes of an existing log shown when a cell is selected (its tail).
INITIAL_BYTES = 32_768
#: Lines the pane keeps.
MAX_LINES = 5000


class LogTail:
    """Incremental reader of one file at a time (used from a worker thread)."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._offset = 0
        self._partial = b""

    def read(self, path: str | None) -> tuple[list[str], bool]:
        """New whole lines of ``path``; ``reset`` is True when the path changed (the lines
        then start with the file's last :data:`INITIAL_BYTES`)."""
        reset = path != self.path
        if reset:
            self.path, self._partial = path, b""
            try:
                size = Path(path).stat().st_size if path else 0
            except OSError:
                size = 0
            self._offset = max(0, size - INITIAL_BYTES)
        if not path:
            return [], reset
        notes: list[str] = []
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:
                    # Cut shorter underneath us (a full disk, a tool rewriting it): reading
                    # on from the old offset would show nothing ever again. Start over at
                    # its current tail, and say so rather than silently skipping.
                    notes.append(f"(log cut to {size} bytes; reading from its tail again)")
                    self._offset, self._partial = max(0, size - INITIAL_BYTES), b""
                handle.seek(self._offset)
                chunk = handle.read(1_000_000)
        except OSError:
            return [], reset
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return notes + [line.decode("utf-8", "replace").rstrip("\r") for line in lines], reset


#: What the pane is fed at once: new lines, whether they replace what it shows, its title.
Feed = tuple[list[str], bool, str]


def hold(held: list[Feed], feed: Feed, cap: int = MAX_LINES) -> None:
    """Keep ``feed`` in ``held`` for a pane that cannot take it now (its screen is covered:
    a repaint there would repaint the screen on top), no more than ``cap`` lines: what a
    reset clears goes, and when too many arrived the oldest go and the first feed kept
    clears the pane (it would have scrolled them out anyway)."""
    if feed[1]:
        held.clear()
    held.append(feed)
    count = sum(len(lines) for lines, _, _ in held)
    while count > cap and len(held) > 1:
        count -= len(held.pop(0)[0])
        lines, _, title = held[0]
        held[0] = (lines, True, title)


#: How a search's matches show (in the log and the events panes).
MATCH_STYLE = "black on yellow"


class Matches(Highlighter):
    """Marks every occurrence of ``query`` (case-insensitive) in a line."""

    def __init__(self, query: str) -> None:
        self.query = query

    def highlight(self, text: Text) -> None:
        if self.query:
            text.highlight_words([self.query], MATCH_STYLE, case_sensitive=False)


class LogPane(Log):
    """A log view of one cell attempt (lines arrive via :meth:`feed`); j/k/g/G scroll it."""

    BINDINGS = bindings(SCROLL_NAV)

    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=MAX_LINES, auto_scroll=True, **kwargs)
        #: Layout requests answered by a scroll update instead (tests read it).
        self.layouts_spared = 0

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False):
        styles = self.styles
        if (layout and not recompose and self.is_mounted and self.size.area
                and styles.overflow_x == styles.overflow_y == "scroll"):
            # new lines (a larger virtual size): the scroll bars (always shown: Log's
            # overflow) and the scroll limits follow; the pane's own size, hence the
            # screen's layout, is unchanged
            self.layouts_spared += 1
            self._scroll_update(self.virtual_size)
            layout = False
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def feed(self, lines: list[str], reset: bool, title: str = "") -> None:
        if reset:
            self.clear()
            if title:
                self.border_title = title
        if lines:
            self.write_lines(lines)

    def mark(self, query: str, line: int | None) -> None:
        """Highlight ``query`` ("": none) and scroll so that ``line`` (an index of
        :attr:`lines`; None: stay) is in the middle of the pane (the run screen's search)."""
        self.highlight = bool(query)
        self.highlighter = Matches(query)
        self._render_line_cache.clear()  # the lines drawn so far carry the old marks
        if line is not None:
            middle = max(0, line - self.scrollable_content_region.height // 2)
            self.scroll_to(y=middle, animate=False, immediate=True)
        self.refresh()
