"""The log pane's new lines repaint it without a layout of the run screen (issue 47, item
2: Textual's Log asked for a whole-screen layout at each write and clear, several per cell
end), and it still scrolls to the newest line."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from fugue_tui.app.widgets.log_pane import LogPane


class _Host(App):
    CSS = "#row { height: 1fr; } #log { width: 3fr; } #side { width: 2fr; }"

    def compose(self) -> ComposeResult:
        yield Static("header")
        with Horizontal(id="row"):
            yield LogPane(id="log")
            yield Static("side", id="side")


def _shown(log: LogPane) -> list[str]:
    """The pane's lines as painted now (blank ones left out)."""
    lines = (log.render_line(y).text.strip() for y in range(log.size.height))
    return [line for line in lines if line]


async def _until(check, pilot, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.05)


def test_new_lines_and_a_clear_do_no_screen_layout_and_the_newest_line_shows():
    asyncio.run(_scenario())


async def _scenario() -> None:
    app = _Host()
    async with app.run_test(size=(80, 16)) as pilot:
        log = app.query_one(LogPane)
        screen = app.screen
        # the first layout done (the mount's), none pending
        await _until(lambda: log.size.height > 0 and not screen._layout_required, pilot)
        layouts = []
        original = screen._refresh_layout

        def counted(*args, **kwargs):
            layouts.append(1)
            return original(*args, **kwargs)

        screen._refresh_layout = counted
        for batch in range(5):  # a cell's log growing, then the next cell's
            log.feed([f"line {batch}.{i}" for i in range(10)], batch == 3, "log: cell")
            await pilot.pause(0.05)
        newest = "line 4.9"
        await _until(lambda: _shown(log)[-1:] == [newest], pilot)
        assert log.scroll_y == log.max_scroll_y > 0
        assert log.layouts_spared > 0 and layouts == []
