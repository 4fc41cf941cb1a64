"""The dashboard findings of a fresh user's walk-through (issue 30, items 9, 10 and 14),
each pinned by a test that failed before its fix: ctrl+o lists every problem of a file at
once, an invalid Results filter keeps the keyboard, the Details form shows its focus in
plain text and its integer fields refuse letters, queued and aborted cells say so, and
ctrl+s proposes a file beside the runs folder."""

from __future__ import annotations

import asyncio

from fugue_tui.app.app import FugueApp
from fugue_tui.app.plan_model import load_plan
from tests.app_screen import screen_text, until

SIZE = (150, 48)


def test_load_lists_key_type_and_value_problems_at_once(tmp_path, monkeypatch):
    """The user's file: an unknown key, a string for an integer AND an unknown executor.
    The validation stops at its first error; the loader reported the key and type
    problems ("2 problems") and the executor only once those were fixed."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nexperiment = ["D_ens", "D_nope"]\n'
                   'executors = ["sqe", "mp", "rayy"]\n'
                   'passes = "2"\nretries = -1\n\n[watchdog]\naction = "explode"\n\n'
                   '[options.mp]\nbogus = 1\n\n[options.zzz]\nx = 1\n')
    try:
        load_plan(bad)
    except Exception as exc:  # noqa: BLE001 (the message is what is tested)
        error = str(exc)
    lines = error.splitlines()
    assert lines[0] == f"{bad}: 9 problems:"
    assert lines[1:] == [
        f"{bad}:2: unknown key 'experiment' (did you mean 'experiments'?)",
        # the value of the misspelt key is still checked, under the key meant
        f"{bad}:2: experiments: unknown experiment 'D_nope'" + lines[2].split("'D_nope'")[1],
        f"{bad}:3: unknown executor 'sqe' (did you mean 'seq'?)" + lines[3].split("?)")[1],
        f"{bad}:3: unknown executor 'rayy' (did you mean 'ray'?)" + lines[4].split("?)")[1],
        f"{bad}:4: key 'passes' must be an integer, got '2'",
        f"{bad}:5: key 'retries' must be >= 0, got -1",
        f"{bad}:8: watchdog: key 'action' must be one of kill, flag, got 'explode'",
        f"{bad}:11: options.mp: unknown key 'bogus'" + lines[8].split("'bogus'")[1],
        f"{bad}:13: options.zzz: unknown executor" + lines[9].split("executor")[1],
    ]


def test_ctrl_o_shows_every_problem_of_the_users_file(tmp_path, monkeypatch):
    from textual.widgets import Input, Static

    from fugue_tui.app.screens.modals import PathScreen
    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nexperiment = ["D_ens"]\nexecutors = ["sqe"]\npasses = "2"\n')

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            plan = await until(pilot, lambda: isinstance(app.screen, PlanScreen) and app.screen)
            await pilot.press("ctrl+o")
            await until(pilot, lambda: isinstance(app.screen, PathScreen), what="the dialog")
            app.screen.query_one(Input).value = str(bad)
            await pilot.press("enter")
            await until(pilot, lambda: plan.load_error, what="the load error")
            summary = str(plan.query_one("#preview-summary", Static).render())
            assert "3 problems" in summary
            assert f"{bad}:3: unknown executor 'sqe'" in plan.load_error

    asyncio.run(scenario())


def _results_app(tmp_path, monkeypatch):
    from tests.snapshots.helpers import install

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    install(tmp_path)
    return FugueApp(results="runs")


def test_an_invalid_filter_keeps_the_keyboard_and_no_export_runs_unseen(tmp_path, monkeypatch):
    """The user's keys: `/`, a misspelt field, Enter, then the corrected filter and Enter
    without `/` again. Focus went to the table after the invalid filter, so the letters
    were shortcuts: `e` (in "killed") opened the export dialog and Enter confirmed it before
    it was ever drawn — a whole export in figures/<ts> nobody asked for."""
    from textual.widgets import Input

    from fugue_tui.app.screens.results import ResultsScreen

    app = _results_app(tmp_path, monkeypatch)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                 and app.screen.results is not None and app.screen,
                                 timeout=20, what="the rows")
            box = screen.query_one("#results-filter", Input)
            await pilot.press("slash", *"statsu:killed", "enter")
            await pilot.pause(0.1)
            assert app.focused is box  # the box keeps the keys, its error said beside it
            assert "unknown filter field 'statsu'" in screen_text(app)
            box.value = ""
            await pilot.press(*"status:killed", "enter")
            await until(pilot, lambda: screen.filter_text == "status:killed",
                        what="the corrected filter")
            assert isinstance(app.screen, ResultsScreen)  # no dialog opened by its letters
            await pilot.pause(0.3)
            assert not (tmp_path / "figures").exists()

    asyncio.run(scenario())


def test_the_export_dialog_is_not_answered_by_keys_typed_ahead(tmp_path, monkeypatch):
    """`e` then Enter in one burst: the dialog appeared and was answered before it could be
    read. The early Enter is refused (and says why); one after the dialog was shown exports."""
    from fugue_tui.app.screens.modals import PathScreen
    from fugue_tui.app.screens.results import EXPORT_ARM_S, ResultsScreen

    app = _results_app(tmp_path, monkeypatch)
    asked: list[str] = []

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                 and app.screen.results is not None and app.screen,
                                 timeout=20, what="the rows")
            monkeypatch.setattr(screen, "_export", lambda runs, folder: asked.append(folder))
            await pilot.press("e", "enter")
            dialog = app.screen
            assert isinstance(dialog, PathScreen) and dialog.early_enters == 1
            assert "Enter came before this dialog was shown" in screen_text(app)
            assert asked == []
            await pilot.pause(EXPORT_ARM_S + 0.1)
            await pilot.press("enter")
            await until(pilot, lambda: asked, what="the export")
            assert asked[0].startswith("figures")

    asyncio.run(scenario())
