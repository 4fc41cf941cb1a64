"""Plan screen through the keyboard (Textual pilot, no runner started): select, preview,
save, reload with identical keys, bad files reported in the UI, keymap, palette, help."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Input, Static

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.modals import ConfirmScreen, HelpScreen, PathScreen
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import screen_text, until

SIZE = (150, 46)


def _plan(app) -> PlanScreen:
    return next(s for s in app.screen_stack if isinstance(s, PlanScreen))


def _preview_rows(app) -> list[list[str]]:
    table = _plan(app).query_one("#preview", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def _summary(app) -> str:
    return str(_plan(app).query_one("#preview-summary", Static).render())


async def _ready(pilot):
    app = pilot.app
    await until(pilot, lambda: _plan(app).query_one(CatalogueTree).experiments, what="catalogue")
    return _plan(app).query_one(CatalogueTree)


async def _type_path(pilot, path: str) -> None:
    await until(pilot, lambda: isinstance(pilot.app.screen, PathScreen), what="path dialog")
    box = pilot.app.screen.query_one(Input)
    box.value = path
    await pilot.press("enter")


def test_select_preview_save_and_reload(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            tree = await _ready(pilot)
            tree.focus()
            # the offline family comes first, the cursor on its line: D_ens two moves down
            await pilot.press("j", "j")
            assert tree.highlighted_experiment().id == "D_ens"
            assert "can run here" in str(_plan(app).query_one("#exp-details", Static).render())
            await pilot.press("space")
            await until(pilot, lambda: _preview_rows(app), what="the preview")
            rows = _preview_rows(app)
            assert [r[:6] for r in rows] == [["1", "D_ens", "seq", "–", "1", "5"]]
            assert rows[0][7] == "run" and len(rows[0][6]) == 16
            assert "1 cells: 1 run, 0 skipped" in _summary(app)
            key = rows[0][6]
            # a second pass through the form: two cells, new keys
            passes = _plan(app).query_one("#f-passes", Input)
            passes.value = "2"
            await until(pilot, lambda: len(_preview_rows(app)) == 2, what="two passes")
            keys = [r[6] for r in _preview_rows(app)]
            assert key in keys
            await pilot.press("ctrl+s")
            await _type_path(pilot, str(tmp_path / "saved" / "mine.toml"))
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen),
                        what="may the folder saved/ be created")
            await pilot.press("y")
            await until(pilot, lambda: (tmp_path / "saved" / "mine.toml").exists(), what="save")
            text = (tmp_path / "saved" / "mine.toml").read_text()
            assert 'experiments = [\n    "D_ens",\n]' in text or 'experiments = ["D_ens"]' in text
            assert "passes = 2" in text
            # clear everything, then load the file back: the same cells and keys
            await pilot.press("c")
            await until(pilot, lambda: "select at least one" in _summary(app), what="cleared")
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(tmp_path / "saved" / "mine.toml"))
            await until(pilot, lambda: [r[6] for r in _preview_rows(app)] == keys,
                        what="the reloaded keys")
            assert tree.ordered() == ["D_ens"]
            assert _plan(app).query_one("#f-passes", Input).value == "2"

    asyncio.run(scenario())


def test_bad_campaign_files_are_reported_not_fatal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x"\nexperiments = "D_ens\n')
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('experiments = "D_ens,D_nope"\n')

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await _ready(pilot)
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(broken))
            await until(pilot, lambda: "not loaded" in _summary(app), what="the error")
            assert "broken.toml:2:" in _summary(app) and "invalid TOML" in _summary(app)
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(unknown))
            await until(pilot, lambda: "D_nope" in _summary(app), what="the unknown id")
            assert "unknown.toml:1: experiments: unknown experiment 'D_nope'" in _summary(app)
            # a bad value typed in the form names the key; the plan is not launched
            await pilot.press("a")
            _plan(app).query_one("#f-passes", Input).value = "0"
            await until(pilot, lambda: "'passes' must be between 1" in _summary(app),
                        what="the passes error")
            await pilot.press("ctrl+r")
            await pilot.pause(0.2)
            assert isinstance(app.screen, PlanScreen) and not (tmp_path / "runs").exists()

    asyncio.run(scenario())


def test_keymap_palette_and_help(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    (config / "keymap.toml").write_text('[keymap]\n"plan.select-available" = "A"\n')
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(config))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            tree = await _ready(pilot)
            await pilot.press("a")  # remapped away: nothing happens
            await pilot.pause(0.1)
            assert tree.ordered() == []
            await pilot.press("A")
            assert tree.ordered() == ["D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"]
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert {"all here", "launch", "save", "load", "attach", "quit", "help"} <= set(titles)
            assert not {"kill+retry", "kill+skip"} & set(titles)  # not on this screen
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.pause(0.1)
            help_text = screen_text(app)
            assert "run.retry" in help_text and "plan.select-available" in help_text
            assert "A " in help_text.split("plan.select-available")[0].splitlines()[-1]
            assert "keymap.toml" in help_text
            await pilot.press("escape")
            assert isinstance(app.screen, PlanScreen)
            await pilot.press("q")  # nothing runs: quits at once
        assert app.return_code == 0

    asyncio.run(scenario())


def test_attach_searches_the_runs_folder_with_its_tilde_expanded(tmp_path, monkeypatch):
    """The form's runs_dir "~/runs" was searched as a folder literally named "~"."""
    import fugue_tui.app.process as process

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    searched: list[str] = []
    monkeypatch.setattr(process, "running_campaigns",
                        lambda runs_dir: searched.append(str(runs_dir)) or [])

    async def scenario():
        app = FugueApp(runs_dir="~/runs")
        async with app.run_test(size=SIZE) as pilot:
            await _ready(pilot)
            _plan(app).doc["runs_dir"] = "~/runs"
            await pilot.press("ctrl+t")
            await until(pilot, lambda: isinstance(app.screen, PathScreen), what="attach dialog")
            assert searched == [str(tmp_path / "home" / "runs")]
            assert app.screen.query_one(Input).value.startswith(str(tmp_path / "home" / "runs"))

    asyncio.run(scenario())


def test_a_stream_campaign_loads_shows_its_stream_and_launches(tmp_path, monkeypatch):
    """A stream campaign file (``arrivals``, no experiments) loads into the plan screen,
    previews its cells with its stream in one line, and ``ctrl+r`` launches it through
    :func:`launch_plan` (it said "select at least one experiment" and refused)."""
    import fugue_tui.app.screens.plan as plan_screen

    monkeypatch.chdir(tmp_path)
    stream = tmp_path / "s.toml"
    stream.write_text('name = "su"\nexecutors = ["seq", "mp"]\ndevice = "cpu"\n'
                      'arrivals = { process = "poisson", rate = 4.0, count = 4, seed = 3, '
                      'mix = { D_ens = 1.0 } }\n')
    launched = []

    def launch(doc, resume, saved):
        launched.append((doc, saved))
        raise plan_screen.LaunchFailed("", "stopped here by the test")

    monkeypatch.setattr(plan_screen, "launch_plan", launch)

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await _ready(pilot)
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(stream))
            await until(pilot, lambda: "stream: poisson" in _summary(app), what="the stream")
            assert "2 cells: 2 run" in _summary(app)
            assert "stream: poisson, 4 jobs/s, 4 jobs, seed 3, mix D_ens 1" in _summary(app)
            await pilot.press("ctrl+r")
            await until(pilot, lambda: launched, what="the launch")
            doc, saved = launched[0]
            assert doc["arrivals"]["count"] == 4 and saved is not None
            assert saved[0] == stream

    asyncio.run(scenario())


def test_the_catalogue_marks_a_streams_templates_and_forgets_them_for_a_batch(tmp_path,
                                                                              monkeypatch):
    """A stream campaign selects no experiments (its mix names them): the catalogue said
    "0/5 selected" beside a stream of five templates. Each template is marked ``[s]`` with
    its share of the mix; a batch campaign loaded next shows selections again."""
    from fugue_tui.app.widgets.catalogue_tree import CatalogueTree

    monkeypatch.chdir(tmp_path)
    stream = tmp_path / "s.toml"
    stream.write_text('name = "su"\nexecutors = ["seq"]\ndevice = "cpu"\n'
                      'arrivals = { process = "poisson", rate = 4.0, count = 4, seed = 3, '
                      'mix = { D_ens = 3, D_reg = 1 } }\n')
    batch = tmp_path / "b.toml"
    batch.write_text('name = "b"\nexperiments = "D_cv"\nexecutors = ["seq"]\n')

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await _ready(pilot)
            tree = app.screen.query_one(CatalogueTree)
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(stream))
            await until(pilot, lambda: "[s] D_ens" in screen_text(app), what="the marks")
            text = screen_text(app)
            assert "in the stream: 75 %" in text and "in the stream: 25 %" in text
            assert "ensemble  (2/2 in the stream" in text and "[s] D_cv" not in text
            assert tree.selected == set()
            await pilot.press("ctrl+o")
            await _type_path(pilot, str(batch))
            await until(pilot, lambda: "[x] D_cv" in screen_text(app), what="the batch")
            assert "[s] " not in screen_text(app) and "in the stream" not in screen_text(app)

    asyncio.run(scenario())


def test_a_traces_templates_are_counted_in_jobs(tmp_path):
    from engine.define.campaign import load_campaign
    from fugue_tui.app.models.plan import stream_templates

    (tmp_path / "t.csv").write_text("time_s,experiment\n0,D_ens\n1,D_reg\n2,D_ens\n")
    path = tmp_path / "c.toml"
    path.write_text('name = "t"\nexecutors = ["seq"]\narrivals = { trace = "t.csv" }\n')
    assert stream_templates(load_campaign(path)) == {"D_ens": "2 jobs", "D_reg": "1 job"}
    assert stream_templates(None) == {}
