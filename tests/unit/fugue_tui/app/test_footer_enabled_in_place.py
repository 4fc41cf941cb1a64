"""The key footer marks keys enabled or disabled in place: the run screen's retry, skip
and kill change twice at each cell end (the cell ended, the next started), and Textual's
footer removed and mounted every key again each time (issue 47, item 2's CPU bound)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.widgets._footer import FooterKey

from fugue_tui.app.widgets.footer import KeyFooter
from tests.app_screen import until


class FooterApp(App):
    BINDINGS = [("x", "thing", "thing"), ("y", "other", "other")]
    able = True

    def compose(self) -> ComposeResult:
        yield KeyFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "thing" and not self.able else True  # None: shown disabled

    def action_thing(self) -> None: ...

    def action_other(self) -> None: ...


def test_a_key_disabled_and_enabled_again_without_recomposing():
    async def scenario():
        app = FooterApp()
        async with app.run_test(size=(80, 10)) as pilot:
            footer = app.query_one(KeyFooter)
            await until(pilot, lambda: footer.query(FooterKey), what="the footer's keys")
            recomposes = footer.recomposes
            key = next(k for k in footer.query(FooterKey) if k.action == "thing")
            assert not key.has_class("-disabled")

            app.able = False
            app.refresh_bindings()
            await until(pilot, lambda: footer.restyles == 1, what="thing disabled")
            assert key.has_class("-disabled") and key._disabled
            assert key.is_attached  # the same widget: not mounted again
            app.able = True
            app.refresh_bindings()
            await until(pilot, lambda: footer.restyles == 2, what="thing enabled again")
            assert not key.has_class("-disabled") and not key._disabled
            assert footer.recomposes == recomposes

    asyncio.run(scenario())
