"""Keys act where they were typed (issue 47): keys typed right after Tab land in the field
Tab moved to; the plan screen's selection keys act on the catalogue only, and a selection
change can be undone."""

from __future__ import annotations

import asyncio

from textual import events
from textual.widgets import Checkbox, Input

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import screen_text, until

SIZE = (160, 48)


def _plan(app) -> PlanScreen:
    return next(s for s in app.screen_stack if isinstance(s, PlanScreen))


def _value(app, widget_id: str) -> str:
    return _plan(app).query_one(f"#{widget_id}", Input).value


def test_digits_typed_right_after_tab_land_in_the_field_tab_moved_to(tmp_path, monkeypatch):
    """``Tab 5 Tab 6 Tab 7`` from ``name``, each pair in one read (posted back to back, as
    the driver does): passes 5, seed 6, retries 7, the name untouched. On main the digits
    replaced the value of the field being left: name 5, passes 6, seed 7."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: _plan(app).query_one(CatalogueTree).experiments,
                        what="catalogue")
            _plan(app).query_one("#f-name", Input).focus()
            await until(pilot, lambda: app.focused is _plan(app).query_one("#f-name"),
                        what="name focused")
            for digit in "567":
                app.post_message(events.Key("tab", None))
                app.post_message(events.Key(digit, digit))
            await until(pilot, lambda: app.focused is _plan(app).query_one("#f-retries")
                        and _value(app, "f-retries") == "7", what="retries 7")
            assert (_value(app, "f-name"), _value(app, "f-passes"), _value(app, "f-seed"),
                    _value(app, "f-retries")) == ("dashboard", "5", "6", "7")
            # and back: shift+tab then a digit goes to seed
            app.post_message(events.Key("shift+tab", None))
            app.post_message(events.Key("9", "9"))
            await until(pilot, lambda: _value(app, "f-seed") == "9", what="seed 9")
            assert _value(app, "f-retries") == "7"
            assert _plan(app).doc["passes"] == 5 and _plan(app).doc["seed"] == 9

    asyncio.run(scenario())


def _noted(app, message: str) -> bool:
    return any(n.message == message for n in app._notifications)  # noqa: SLF001


def _footer(app) -> str:
    return screen_text(app).splitlines()[-1]


def test_selection_keys_act_on_the_catalogue_only_and_undo(tmp_path, monkeypatch):
    """On a settings checkbox ``c`` cleared the whole selection silently and ``a``
    selected everything (the footer offered them there). Now they are the catalogue
    pane's: the checkbox takes them as nothing, the footer offers them only in the pane,
    ``c`` says what it dropped, and ``u`` undoes each change in turn."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            tree = await until(pilot, lambda: (t := _plan(app).query_one(CatalogueTree))
                               .experiments and t, what="catalogue")
            await until(pilot, lambda: tree.has_focus and "clear" in _footer(app),
                        what="the footer offering c in the catalogue")
            await pilot.press("j", "j", "space")  # D_ens (the cursor starts on the first line)
            await until(pilot, lambda: tree.ordered() == ["D_ens"], what="D_ens selected")
            box = _plan(app).query_one("#exec-seq", Checkbox)
            box.focus()
            await until(pilot, lambda: box.has_focus and "clear" not in _footer(app)
                        and "all here" not in _footer(app), what="a footer without c, a")
            before = box.value
            await pilot.press("c", "a", "u", "space")
            await until(pilot, lambda: box.value is not before, what="space on the checkbox")
            assert tree.ordered() == ["D_ens"] and _plan(app).doc["experiments"] == ["D_ens"]
            tree.focus()
            await pilot.press("a")
            everything = await until(pilot, lambda: len(tree.ordered()) > 1 and tree.ordered(),
                                     what="all that run here")
            await pilot.press("c")
            await until(pilot, lambda: _noted(app, "cleared the selection "
                                               f"({len(everything)} experiments): u undoes"), what="the clear notice")
            assert tree.ordered() == [] and _plan(app).doc["experiments"] == []
            await pilot.press("u")
            await until(pilot, lambda: tree.ordered() == everything, what="undo of c")
            assert _plan(app).doc["experiments"] == everything
            await pilot.press("u")
            await until(pilot, lambda: tree.ordered() == ["D_ens"], what="undo of a")
            await pilot.press("u")
            await until(pilot, lambda: tree.ordered() == [], what="undo of space")
            await pilot.press("u")
            await until(pilot, lambda: _noted(app, "nothing to undo in the selection"),
                        what="nothing left to undo")

    asyncio.run(scenario())


def test_a_filter_typed_right_after_slash_lands_in_the_filter(tmp_path, monkeypatch):
    """``/exec`` in one read: the filter box had the focus only at the next idle, so the
    letters went to the table (``e`` opened the export dialog). ``/`` inside the box is
    text."""
    import shutil

    from fugue_tui.app.screens.results import ResultsScreen
    from tests.snapshots.helpers import FIXTURES

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    shutil.copytree(FIXTURES / "harness", tmp_path / "harness")

    async def scenario():
        app = FugueApp(results="harness")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                        and app.screen.results is not None, what="the results")
            screen = app.screen
            box = screen.query_one("#results-filter", Input)
            for key, char in [("slash", "/"), *[(c, c) for c in "exec"], ("slash", "/")]:
                app.post_message(events.Key(key, char))
            await until(pilot, lambda: box.value == "exec/", what="'exec/' in the filter")
            assert app.screen is screen and box.has_focus  # no export dialog opened

    asyncio.run(scenario())
