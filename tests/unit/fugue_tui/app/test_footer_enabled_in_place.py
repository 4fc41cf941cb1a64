"""The key footer marks keys enabled or disabled in place: the run screen's retry, skip
and kill change twice at each cell end (the cell ended, the next started), and Textual's
footer removed and mounted every key again each time (issue 47, item 2's CPU bound). Keys
that go away and come back are hidden and shown in place too: the plan form's Tab between a
text field (``?`` and ``q`` type there) and a checkbox (they act) recomposed the footer on 6
of 20 Tabs (issue 47, item 7: Tab never slower than ``j``)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.widgets._footer import FooterKey

from fugue_tui.app.widgets.footer import KeyFooter
from tests.app_screen import until


class FooterApp(App):
    BINDINGS = [("x", "thing", "thing"), ("y", "other", "other"), ("z", "late", "late")]
    able = True
    offered = {"thing", "other"}

    def compose(self) -> ComposeResult:
        yield KeyFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("thing", "other", "late") and action not in self.offered:
            return False  # False: not shown
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


def test_keys_hidden_and_shown_again_in_place_and_a_new_key_recomposes():
    async def scenario():
        app = FooterApp()
        async with app.run_test(size=(80, 10)) as pilot:
            footer = app.query_one(KeyFooter)
            await until(pilot, lambda: footer.query(FooterKey), what="the footer's keys")
            recomposes = footer.recomposes
            keys = {k.action: k for k in footer.query(FooterKey)}
            assert set(keys) == {"thing", "other", "command_palette"}

            app.offered = {"other"}
            app.refresh_bindings()
            await until(pilot, lambda: footer.toggles == 1, what="thing hidden")
            assert not keys["thing"].display and keys["other"].display
            assert "thing" not in _shown_text(footer) and "other" in _shown_text(footer)
            app.able = False  # hidden and disabled meanwhile: shown again disabled
            app.offered = {"thing", "other"}
            app.refresh_bindings()
            await until(pilot, lambda: footer.toggles == 2, what="thing back")
            assert keys["thing"].display and keys["thing"].is_attached
            assert keys["thing"].has_class("-disabled")
            assert footer.recomposes == recomposes  # the same widgets throughout

            app.offered = {"thing", "other", "late"}  # never mounted: recomposed
            app.refresh_bindings()
            await until(pilot, lambda: footer.recomposes == recomposes + 1, what="late")
            assert "late" in _shown_text(footer)
            app.offered = {"late"}  # from the new composition, in place again
            app.refresh_bindings()
            await until(pilot, lambda: footer.toggles == 3, what="only late")
            assert _shown_text(footer) == ["late"]

    asyncio.run(scenario())


def _shown_text(footer) -> list[str]:
    return [k.description for k in footer.query(FooterKey)
            if k.display and not k.has_class("-command-palette")]
