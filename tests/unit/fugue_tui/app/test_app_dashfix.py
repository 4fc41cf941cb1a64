"""The dashboard findings of a fresh user's walk-through (issue 30, items 9, 10 and 14),
each pinned by a test that failed before its fix: ctrl+o lists every problem of a file at
once, an invalid Results filter keeps the keyboard, the Details form shows its focus in
plain text and its integer fields refuse letters, queued and aborted cells say so, and
ctrl+s proposes a file beside the runs folder."""

from __future__ import annotations

import asyncio

from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.plan import load_plan
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
        # the list of valid names once (it was repeated under each unknown executor)
        f"{bad}:3: unknown executor 'rayy' (did you mean 'ray'?)",
        f"{bad}:4: key 'passes' must be an integer, got '2'",
        f"{bad}:5: key 'retries' must be >= 0, got -1",
        f"{bad}:8: watchdog: key 'action' must be one of kill, flag, got 'explode'",
        f"{bad}:11: options.mp: unknown key 'bogus'" + lines[8].split("'bogus'")[1],
        f"{bad}:13: options.zzz: unknown executor",
    ]
    assert lines[3].endswith("; known: mp, ray, seq, unified_model")


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
            # the keys matter here, not the rows: no need to wait for the figures
            screen = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                 and app.screen.loads and app.screen, timeout=20,
                                 what="the screen")
            box = screen.query_one("#results-filter", Input)
            await pilot.press("slash", *"statsu:killed", "enter")
            await pilot.pause(0.1)
            assert app.focused is box  # the box keeps the keys, its error said beside it
            await until(pilot, lambda: "unknown filter field 'statsu'" in screen_text(app),
                        what="the filter's error")
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

    assert 0.3 <= EXPORT_ARM_S <= 1.0  # longer than a typed burst, shorter than reading
    app = _results_app(tmp_path, monkeypatch)
    asked: list[str] = []

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                 and app.screen.results is not None and app.screen,
                                 timeout=20, what="the rows")
            monkeypatch.setattr(screen, "_export", lambda runs, folder: asked.append(folder))
            # a long arming time: the Enter right after `e` is early however loaded the
            # machine (with 0.5 s a slow run let it through: the test flaked, not the rule)
            monkeypatch.setattr("fugue_tui.app.screens.results.EXPORT_ARM_S", 30.0)
            await pilot.press("e", "enter")
            dialog = app.screen
            assert isinstance(dialog, PathScreen) and dialog.early_enters == 1
            assert "Enter came too soon (typed ahead?): check, then Enter again" in screen_text(app)
            assert asked == []
            dialog._shown_at -= 31.0  # the dialog has been on screen for a while
            await pilot.press("enter")
            await until(pilot, lambda: asked, what="the export")
            assert asked[0].startswith("figures")

    asyncio.run(scenario())


def _plain(app) -> str:
    return screen_text(app)


def test_the_focused_field_is_marked_in_plain_text_and_integers_refuse_letters(tmp_path,
                                                                              monkeypatch):
    """A capture without colours (tmux capture-pane -p) showed no focus at all; a space
    typed into mp's grace_period was taken (the option boxes were plain text)."""
    from textual.widgets import Checkbox, Input

    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=(160, 48)) as pilot:
            plan = await until(pilot, lambda: isinstance(app.screen, PlanScreen) and app.screen)
            await until(pilot, lambda: "─ > catalogue ─" in _plain(app), what="the pane's mark")
            # the tree puts its cursor on the first line once the catalogue is in: a down
            # pressed before that is lost (it failed so under load)
            await until(pilot, lambda: "│> ▼ offline" in _plain(app), what="the first line")
            await pilot.press("down")  # the tree's cursor line (it starts on the first)
            await until(pilot, lambda: "├─ > ▼ ensemble" in _plain(app), what="the cursor")
            passes = plan.query_one("#f-passes", Input)
            passes.focus()
            await until(pilot, lambda: "> passes" in _plain(app), what="the focus mark")
            # the pane titles follow the field's focus on a later refresh (seen under load)
            await until(pilot, lambda: "─ > settings ─" in _plain(app)
                        and "─ catalogue ─" in _plain(app), what="the pane's mark moved")
            assert "> seed" not in _plain(app) and "> ▼ ensemble" not in _plain(app)
            grace = plan.query_one("#opt-mp-grace_period", Input)
            grace.focus()
            await until(pilot, lambda: "> grace_period" in _plain(app), what="the option's mark")
            assert "> passes" not in _plain(app)
            await pilot.press("space", "a", "2", "x")
            assert grace.value == "2"
            assert plan.doc["options"]["mp"]["grace_period"] == 2
            box = plan.query_one("#exec-mp", Checkbox)
            box.focus()
            await until(pilot, lambda: "> mp:" in _plain(app), what="the checkbox's mark")

    asyncio.run(scenario())


def test_placeholders_read_as_hints_and_are_cut_at_a_word():
    from engine.plugins import load_plugins
    from engine.registry import EXECUTORS
    from fugue_tui.app.widgets.campaign_form import _fields, fit_hint, option_hint

    load_plugins()
    hints = {f.path: f.hint for f in _fields()}
    assert hints["precision"].startswith("e.g. fp32")
    assert hints["device"] == "default auto"  # a blank select read "Select"
    assert option_hint(EXECUTORS.get("mp").option_fields["grace_period"]) == "default 1 · >= 1"
    assert option_hint(EXECUTORS.get("mp").option_fields["devices"]).startswith("unset · ")
    assert fit_hint("e.g. fp32 or fp32,amp-bf16 (unset: fp32)", 30) == "e.g. fp32 or fp32,amp-bf16…"
    assert fit_hint("default fifo · fifo|sha|asha|median|hyperband", 20) == "default fifo…"
    assert fit_hint("short", 20) == "short"


def _aborted_run(root):
    """Three cells: the first ran, the second was killed by the abort, the third never
    started (it stayed "queued" on screen after the campaign had stopped)."""
    from tests.unit.fugue_tui.app.test_app_run_screen import T0, _write

    run = root / "runs" / "ab"

    def runner(kind, dt, **fields):
        return {"ts": T0 + dt, "type": kind, "campaign": "ab", **fields}

    labels = {"a" * 16: "D_ens seq pass 1", "b" * 16: "D_ens mp pass 1",
              "c" * 16: "D_ens unified_model pass 1"}
    events = [runner("campaign_started", 0, cells=3, device="cpu", run_dir=str(run),
                     runner_pid=1, resume=False)]
    events += [runner("queued", 0, cell=k, index=i, label=lab)
               for i, (k, lab) in enumerate(labels.items(), start=1)]
    attempts = {k: run / "cells" / f"00{i}-{k[:8]}" / "attempt-1"
                for i, k in enumerate(labels, start=1)}
    for folder in attempts.values():
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_text("")
        (folder / "cell.log").write_text("")

    def started(key, dt, index, pid):
        return runner("cell_started", dt, cell=key, index=index, label=labels[key], attempt=1,
                      pid=pid, events=str(attempts[key] / "events.jsonl"),
                      log_path=str(attempts[key] / "cell.log"))

    events += [started("a" * 16, 1, 1, 2),
               runner("done", 5, cell="a" * 16, attempt=1, exit_code=0, error=""),
               started("b" * 16, 6, 2, 3),
               runner("killed", 8, cell="b" * 16, attempt=1,
                      reason="campaign aborted by control command (stopped from the dashboard)"),
               runner("campaign_aborted", 8),
               runner("campaign_done", 8, ok=False, exit_code=1, failed=1)]
    _write(run / "runner.jsonl", events)
    return run


def test_a_queued_cell_says_queued_and_an_aborted_campaigns_rest_says_not_run(tmp_path,
                                                                            monkeypatch):
    """The job pane of a cell not started showed "attempt 0 · –"; after an abort the cells
    left stayed "queued" though nothing would run them."""
    from fugue_tui.app.screens.run import RunScreen
    from fugue_tui.app.widgets.cell_table import CellTable
    from fugue_tui.app.widgets.job_progress import JobProgress
    from tests.unit.fugue_tui.app.test_app_run_screen import T0

    monkeypatch.chdir(tmp_path)
    run = _aborted_run(tmp_path)

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: T0 + 20)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen.query_one(CellTable).row_count == 3
                                 and app.screen)
            await pilot.press("G")  # the last cell: never started
            jobs = screen.query_one(JobProgress)
            await until(pilot, lambda: "D_ens unified_model" in str(jobs.render()),
                        what="the last cell's pane")
            pane = str(jobs.render())
            assert "attempt 0" not in pane
            assert "[3/3] D_ens unified_model pass 1 · not run" in pane
            assert "not run: campaign aborted before this cell started" in pane
            row = [line for line in screen_text(app).splitlines() if "unified_model" in line
                   and "pass 1" in line][0]
            assert "not run" in row and "queued" not in row
            assert "campaign aborted: not run" in row
            header = screen_text(app).splitlines()[0]
            assert "cells 2/3: 1 done, 1 killed, 1 not run" in header, header

    asyncio.run(scenario())


def test_job_pane_of_a_queued_cell_in_a_live_campaign_says_queued():
    from engine.observe.state import CellState
    from fugue_tui.app.models.cells import cell_row

    cell = CellState("k", 2, "D_ens mp pass 1")
    assert str(cell_row(cell, 0.0, "running")[4]) == "queued"
    assert str(cell_row(cell, 0.0, "aborted")[4]) == "not run"
    assert str(cell_row(cell, 0.0, "interrupted")[8]) == "campaign interrupted: not run"
    done = CellState("d", 1, "D_ens seq pass 1", state="done", attempt=1)
    assert str(cell_row(done, 0.0, "aborted")[4]) == "done"  # only what never started


def test_the_speedup_strip_fits_one_line_at_every_width():
    """At 160 columns the strip wrapped and the header (three lines at most) cut it off."""
    from fugue_tui.app.models.eta import Eta
    from fugue_tui.app.models.so_far import fit_strip

    parts = [(f"E{i:02d} unified_model vf:1,s:0,fl:0", f"1.{i:02d}×", f"[0.9{i % 10}, 1.5{i}]")
             for i in range(1, 7)]
    eta = Eta(left_s=200.0, spread_s=0.0, measured=18, total=20)
    for width in (78, 98, 158):
        text = fit_strip(parts, eta, width)
        assert len(text) <= width, (width, text)
        assert text.endswith("ETA 3:20") and "so far: E01 unified_model" in text
        assert "more (v: results)" in text or width == 158
    few = fit_strip(parts[:1], eta, 158)
    assert few == ("speedup so far: E01 unified_model vf:1,s:0,fl:0 1.01× [0.91, 1.51] · "
                   "ETA 3:20 (18 of 20 cells measured)")
    # an uncertain ETA keeps its spread in the narrowest form (issue 47, item 8)
    unsure = fit_strip(parts, Eta(200.0, 80.0, 2, 20), 78)
    assert unsure.endswith("ETA ~3:20 ±1:20") and len(unsure) <= 78, unsure
    assert fit_strip(parts[:2], None, 98) == ("speedup so far: E01 unified_model vf:1,s:0,fl:0 "
                                              "1.01× · E02 unified_model vf:1,s:0,fl:0 1.02×")
    assert fit_strip([], None, 80) == ""


def test_ctrl_s_proposes_a_file_beside_the_runs_folder_and_asks_before_a_new_folder(
        tmp_path, monkeypatch):
    """ctrl+s proposed campaigns/dashboard.toml under the working directory and created
    campaigns/ there without a word."""
    from textual.widgets import Input

    from fugue_tui.app.models.plan import default_save_path
    from fugue_tui.app.screens.modals import ConfirmScreen, PathScreen
    from fugue_tui.app.screens.plan import PlanScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    assert str(default_save_path({"name": "x", "runs_dir": "runs"})) == "x.toml"
    assert default_save_path({"runs_dir": str(tmp_path / "proj" / "runs")}) == \
        tmp_path / "proj" / "campaign.toml"
    (tmp_path / "proj" / "campaigns").mkdir(parents=True)
    assert default_save_path({"name": "y", "runs_dir": str(tmp_path / "proj" / "runs")}) == \
        tmp_path / "proj" / "campaigns" / "y.toml"

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            plan = await until(pilot, lambda: isinstance(app.screen, PlanScreen) and app.screen)
            await pilot.press("ctrl+s")
            dialog = await until(pilot, lambda: isinstance(app.screen, PathScreen)
                                 and app.screen)
            assert dialog.query_one(Input).value == "dashboard.toml"
            dialog.query_one(Input).value = "new/plan.toml"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen),
                        what="the question")
            assert "new does not exist. Create it" in str(app.screen.question)
            await pilot.press("n")
            await until(pilot, lambda: app.screen is plan, what="back on the plan")
            await pilot.pause(0.2)
            assert not (tmp_path / "new").exists() and not (tmp_path / "campaigns").exists()
            await pilot.press("ctrl+s")
            dialog = await until(pilot, lambda: isinstance(app.screen, PathScreen)
                                 and app.screen)
            await pilot.press("enter")
            await until(pilot, lambda: (tmp_path / "dashboard.toml").is_file(), what="saved")

    asyncio.run(scenario())
