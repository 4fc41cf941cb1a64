"""Help that a first-time user finds (issue 47): Escape leaves a field so that ``?`` opens
the help, the palette answers ``help`` from a field too, and the help names keys as they
are typed (``/``, ``+, =``), lists Tab, j/k/g/G and the page keys, and at 80×24 shows a
screenful of keys, one a line, scrolling to the rest. (Escape in the Results filter:
test_focus_shown.py.)"""

from __future__ import annotations

import asyncio

from textual.widgets import Input

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.modals import HelpScreen
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import screen_text, until


def _plan(app) -> PlanScreen:
    return next(s for s in app.screen_stack if isinstance(s, PlanScreen))


async def _ready(pilot) -> None:
    await until(pilot, lambda: _plan(pilot.app).query_one(CatalogueTree).experiments,
                what="the catalogue")


def test_escape_leaves_a_field_and_the_palette_offers_help_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=(160, 48)) as pilot:
            await _ready(pilot)
            name = _plan(app).query_one("#f-name", Input)
            name.focus()
            await until(pilot, lambda: name.has_focus, what="the name field")
            # in a field "?" is text; the palette still has the help
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "help" in titles
            await pilot.press("ctrl+p")
            await pilot.press(*"help")
            await until(pilot, lambda: "show every key and its id" in screen_text(app),
                        what="the palette's help entry")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is _plan(app) and name.has_focus,
                        what="back in the name field")
            # Escape leaves the field for its pane: "?" is the help again, not text
            await pilot.press("escape")
            form = _plan(app).form
            await until(pilot, lambda: app.focused is form and "─ > settings" in
                        screen_text(app), what="the settings pane with the keys")
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="? help")
            assert name.value == "dashboard"

    asyncio.run(scenario())


def test_the_help_names_keys_as_typed_and_scrolls_at_80x24(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen)
                        and "app.help" in screen_text(app), what="the help")
            text = screen_text(app)
            keys = [line for line in text.splitlines()
                    if any(f" {i}" in line for i in ("app.", "focus.", "plan."))]
            assert len(keys) >= 12, text  # a screenful of keys, one a line (was about 4)
            assert "focus.next" in text and " tab " in text
            await pilot.press("G")  # scrolls to the end: the last rows show
            await until(pilot, lambda: "ctrl+p" in screen_text(app)
                        and "pgup, pgdn" in screen_text(app), what="the end of the help")
            await pilot.press("g")
            # at the top, not on the way there: pgdn during the scroll's animation went on
            # from where it was (a longer list, issue 48's keys: a longer way back)
            body = app.screen.query_one("#dialog")
            await until(pilot, lambda: "app.help" in screen_text(app) and body.scroll_y == 0,
                        what="the top again")
            # pgdn, a page at a time, to the page with results.filter (the second, while
            # the list ended on it; issue 48's keys made it longer)
            for _ in range(8):
                top = body.scroll_y
                await pilot.press("pagedown")
                await until(pilot, lambda t=top: body.scroll_y > t, what="a page down")
                if "results.filter" in screen_text(app):
                    break
            await until(pilot, lambda: "results.filter" in screen_text(app)
                        and "app.help" not in screen_text(app), what="pages down")
            line = next(ln for ln in screen_text(app).splitlines() if "results.filter" in ln)
            assert " / " in line
            whole = app.screen.query_one("#help-table").render()
            plain = str(whole)
            for textual_name in ("slash", "equals_sign", "question_mark", "escape"):
                assert textual_name not in plain, textual_name
            assert "+, =" in plain and "nav.down" in plain and "shift+tab" in plain

    asyncio.run(scenario())
