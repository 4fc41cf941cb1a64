"""The plan form within reach (issue 47, item 7 and item 10's devices field): the tree shows
its cursor line from the start, the first Tab from the catalogue lands on a field (it
landed on the form's container, nothing marked), a jump key per section of the form (shown
in its title, the help and the palette; keys typed right after land in the field jumped
to), and the campaign's ``devices`` key as a field: typed, checked as the runner checks it,
saved to the campaign file and read back. The speed of a Tab is the bench's
(``bench.dashboard_tab``), not a test's."""

from __future__ import annotations

import asyncio
import tomllib

from textual import events
from textual.widgets import Checkbox, Input, Static

from engine.define.campaign import load_campaign
from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import screen_text, until

SIZE = (160, 48)


async def _plan(pilot) -> PlanScreen:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, PlanScreen)
                and app.screen.query_one(CatalogueTree).experiments, timeout=20,
                what="the catalogue")
    return app.screen


def _run(tmp_path, monkeypatch, body) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await body(pilot, await _plan(pilot))

    asyncio.run(scenario())


def test_the_tree_shows_its_cursor_line_at_start(tmp_path, monkeypatch):
    """On main the tree had no cursor line (line -1) until the first key."""
    async def body(pilot, plan):
        tree = plan.query_one(CatalogueTree)
        await until(pilot, lambda: "│> ▼ offline" in screen_text(pilot.app),
                    what="the tree's cursor on its first line")
        assert tree.cursor_line == 0 and tree.has_focus

    _run(tmp_path, monkeypatch, body)


def test_the_first_tab_from_the_catalogue_lands_on_a_field(tmp_path, monkeypatch):
    """On main it focused the form's container, no field marked; Tab again for ``name``.
    Escape in a field still parks the focus on the form, and Tab goes on from there."""
    async def body(pilot, plan):
        app = pilot.app
        await pilot.press("tab")
        await until(pilot, lambda: "> name" in screen_text(app), what="'> name'")
        assert app.focused is plan.query_one("#f-name")
        await pilot.press("escape")
        await until(pilot, lambda: app.focused is plan.form, what="the form itself")
        await pilot.press("tab")
        await until(pilot, lambda: app.focused is plan.query_one("#f-name"),
                    what="the first field again")

    _run(tmp_path, monkeypatch, body)


def test_jump_keys_reach_each_section(tmp_path, monkeypatch):
    """About 20 Tabs reached the executors on main, no key reached a section. Each
    section's title shows its key; a jump and a digit in one read put the digit in the
    field jumped to; the palette offers the jumps and the help lists them."""
    async def body(pilot, plan):
        app = pilot.app
        for title in ("campaign  alt+c", "watchdog  alt+w", "budget  alt+u",
                      "executors  alt+e"):
            assert title in str(plan.query_one(f"#section-{title.split()[0]}",
                                               Static).render())
        plan.query_one("#f-name", Input).focus()
        await until(pilot, lambda: "> name" in screen_text(app), what="in a field")
        for key, char in (("alt+u", "u"), ("6", "6")):
            app.post_message(events.Key(key, char))
        ram = plan.query_one("#f-budget-ram", Input)
        await until(pilot, lambda: ram.value == "6" and "> budget.ram" in screen_text(app),
                    what="6 in budget.ram, marked")
        assert plan.doc["budget"] == {"ram": 6}
        assert plan.query_one("#f-name", Input).value == "dashboard"
        app.post_message(events.Key("alt+e", "e"))
        await until(pilot, lambda: app.focused is plan.query_one("#exec-seq", Checkbox)
                    and "executors  alt+e" in screen_text(app),
                    what="the executors, their title in view")
        app.post_message(events.Key("alt+w", "w"))
        await until(pilot, lambda: app.focused is plan.query_one("#f-watchdog-action"),
                    what="the watchdog's first field")
        app.post_message(events.Key("alt+c", "c"))
        await until(pilot, lambda: app.focused is plan.query_one("#f-name"),
                    what="back to the campaign's first field")
        titles = [c.title for c in app.get_system_commands(plan)]
        assert {"campaign", "watchdog", "budget", "executors"} <= set(titles)
        await pilot.press("escape", "question_mark")
        await until(pilot, lambda: "plan.section-executors" in screen_text(app),
                    what="the jump keys in the help")

    _run(tmp_path, monkeypatch, body)


def test_devices_field_round_trip(tmp_path, monkeypatch):
    """Form → campaign TOML → the runner's campaign, and back into the form; a bad value
    is the runner's one line naming the key; devices replaces device (a file sets one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    saved = tmp_path / "two_gpus.toml"

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            plan = await _plan(pilot)
            box = plan.query_one("#f-devices", Input)
            summary = plan.query_one("#preview-summary", Static)
            box.focus()
            await pilot.press(*"gpu0")
            bad = ("settings: key 'devices': 'gpu0' is not a device (auto, cpu, cuda:N, a "
                   "GPU-… or MIG-… UUID)")
            await until(pilot, lambda: str(summary.render()) == bad,
                        what=f"the one-line refusal ({summary.render()!s})")
            assert "devices" not in plan.doc and plan.doc["device"] == "auto"
            box.value = ""
            await pilot.press(*"cuda:0, cuda:1")
            await until(pilot, lambda: plan.doc.get("devices") == ["cuda:0", "cuda:1"],
                        what="the devices in the plan")
            assert "device" not in plan.doc and not plan.form_errors
            plan.doc["experiments"] = ["D_ens"]
            plan._files.save_to(str(saved))  # noqa: SLF001 (ctrl+s's path dialog skipped)
            await until(pilot, saved.is_file, what="the campaign file")
            on_disk = tomllib.loads(saved.read_text())
            assert on_disk["devices"] == ["cuda:0", "cuda:1"] and "device" not in on_disk
            assert load_campaign(saved).devices == ("cuda:0", "cuda:1")
            # read back: a fresh form shows the file's devices, the device select blank
            box.value = ""
            await until(pilot, lambda: "devices" not in plan.doc, what="devices cleared")
            plan._files.load(str(saved))  # noqa: SLF001
            await until(pilot, lambda: box.value == "cuda:0, cuda:1", what="the file's devices")
            assert plan.doc["devices"] == ["cuda:0", "cuda:1"]

    asyncio.run(scenario())


def test_tabs_over_the_form_hide_and_show_help_and_quit_in_place(tmp_path, monkeypatch):
    """In a text field ``?`` and ``q`` type, on a checkbox they act: the footer follows at
    each Tab without being recomposed (it was on 6 of 20 Tabs: the Tab's frame rebuilt
    every key, issue 47 item 7's "never slower than j")."""
    from fugue_tui.app.widgets.footer import KeyFooter

    async def body(pilot, plan):
        app = pilot.app
        footer = plan.query_one(KeyFooter)
        await until(pilot, lambda: footer.recomposes and "? help" in screen_text(app),
                    what="the footer")
        recomposes, kinds = footer.recomposes, set()
        for _ in range(20):
            before = app.focused
            await pilot.press("tab")
            await until(pilot, lambda b=before: app.focused is not b, what="the next stop")
            typing = isinstance(app.focused, Input)
            kinds.add(typing)
            await until(pilot, lambda t=typing: ("? help" in screen_text(app)) is not t,
                        what=f"'? help' {'hidden' if typing else 'shown'} on {app.focused}")
        assert kinds == {True, False}  # the walk crossed fields and checkboxes
        assert footer.recomposes == recomposes and footer.toggles >= 2

    _run(tmp_path, monkeypatch, body)


def test_after_a_resize_the_focused_field_and_the_trees_cursor_stay_in_view(tmp_path,
                                                                            monkeypatch):
    """160x48 → 80x24: a field low in the form (mp's jobs_per_device) was off the form's
    screen, unmarked, and took the keys unseen; the tree's cursor line (15 j's down) was
    off its pane while the details named it. Found by a first-time user in tmux."""
    async def body(pilot, plan):
        tree = plan.query_one(CatalogueTree)
        plan.set_focus(tree)
        for _ in range(15):
            await pilot.press("j")
        await until(pilot, lambda: tree.cursor_line == 15, what="the cursor 15 lines down")
        line = tree.cursor_line
        await pilot.press("alt+e")
        field = plan.query_one("#opt-mp-jobs_per_device")
        while plan.focused is not field:
            await pilot.press("tab")
        await pilot.resize_terminal(80, 24)

        def in_view() -> bool:
            form, box = plan.form, tree.scrollable_content_region
            row = box.y + line - round(tree.scroll_y)
            return (pilot.app.size == (80, 24)
                    and form.scrollable_content_region.contains_region(field.region)
                    and box.y <= row < box.bottom)

        await until(pilot, in_view, what="the field and the cursor line in view at 80x24")
        await until(pilot, lambda: "> jobs_per_de" in screen_text(pilot.app),
                    what="the field's mark on screen")

    _run(tmp_path, monkeypatch, body)
