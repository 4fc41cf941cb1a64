"""The run screen's events pane: the newest lifecycle lines of the campaign
(:attr:`fugue_tui.live.view.LiveView.recent`) that fit the pane, wrapped to its width,
oldest at the top (the pane used to show the oldest and cut the newest one or two)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static


def recent_text(lines: list[str] | tuple[str, ...], width: int, height: int,
                console: Console) -> Text:
    """The tail of ``lines`` that fills ``height`` rows of ``width`` columns once wrapped
    (all of them before the pane has a size)."""
    if not lines:
        return Text("no lifecycle events yet", style="dim")
    if width < 1 or height < 1:
        return Text("\n".join(lines))
    rows: list[Text] = []
    for line in reversed(lines):
        wrapped = list(Text(line).wrap(console, width))
        if len(rows) + len(wrapped) > height:
            if not rows:  # one line taller than the pane: its end, the newest words
                rows = wrapped[-height:]
            break
        rows = wrapped + rows
    return Text("\n").join(rows)


class RecentLines(Static):
    """The recent lifecycle lines, laid out at paint time for the pane's size then (the
    newest that fit, :func:`recent_text`): laid out when they changed, a pane that the
    layout resized afterwards (the header grows a row when a device appears) kept rows
    sized for its old height, and clipped the newest line at the bottom.

    :attr:`lines` is reactive: assigning other lines repaints the pane (no layout pass: its
    size is the layout's), the same lines do nothing."""

    lines: reactive[tuple[str, ...]] = reactive((), layout=False, repaint=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)

    def render(self) -> Text:
        size = self.content_size
        return recent_text(self.lines, size.width, size.height, self.app.console)
