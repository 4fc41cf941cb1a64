"""Upstream behaviour that fugue-tui works around: in Textual (8.2.8 today) the screen right
under the top one counts as visible even when the top one is opaque, and a widget of it
that repaints makes the whole top screen repaint, again at each later message it handles
(issue 48: the help and the process view repainted in full about 4 times a second over a
running campaign).

The workaround: :class:`fugue_tui.app.screens.run_layout.QuietWhenCovered` (the run screen
and the process view) drops what it would paint while covered. The first test asserts
today's upstream behaviour, so it fails when upstream fixes it; the second, that the
workaround stops the repaints and the screen shows what changed once back on top.
"""

from __future__ import annotations

import asyncio

from textual import _compositor
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from fugue_tui.app.screens.run_layout import QuietWhenCovered
from tests.app_screen import screen_text


class _Top(Screen[None]):
    def compose(self) -> ComposeResult:
        yield Static("on top")


def _below(base: type[Screen]) -> type[Screen]:
    class Below(base):  # type: ignore[valid-type,misc]
        def compose(self) -> ComposeResult:
            yield Static("tick 0", id="tick")

    return Below


def _full_repaints_while_covered(base: type[Screen]) -> tuple[int, str]:
    """Full repaints of the opaque top screen while the screen under it (of ``base``)
    updates a label 20 times, and the screen's text once back on top."""
    full = [0]
    original = _compositor.Compositor.render_full_update

    def counted(self, *args, **kwargs):
        full[0] += 1
        return original(self, *args, **kwargs)

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(_below(base)())

    async def scenario() -> tuple[int, str]:
        app = Host()
        _compositor.Compositor.render_full_update = counted  # type: ignore[method-assign]
        try:
            async with app.run_test(size=(40, 10)) as pilot:
                await pilot.pause(0.2)
                below = app.screen
                await app.push_screen(_Top())
                await pilot.pause(0.2)
                full[0] = 0
                for i in range(1, 21):
                    below.query_one("#tick", Static).update(f"tick {i}")
                    await pilot.pause(0.02)
                covered = full[0]
                app.pop_screen()
                await pilot.pause(0.3)
                return covered, screen_text(app)
        finally:
            _compositor.Compositor.render_full_update = original  # type: ignore[method-assign]

    return asyncio.run(scenario())


def test_an_opaque_screen_is_repainted_whole_for_the_screen_under_it_upstream():
    covered, _ = _full_repaints_while_covered(Screen)
    assert covered >= 10, covered


def test_quiet_when_covered_paints_nothing_until_back_on_top():
    covered, text = _full_repaints_while_covered(QuietWhenCovered)
    assert covered == 0
    assert "tick 20" in text
