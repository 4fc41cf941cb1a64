"""Every dashboard screen rendered from committed recordings (tests/fixtures/dashboard), with
a pinned size, theme, clock and time zone and no cursor blink: an SVG snapshot of each
(tests/snapshots/*.svg, compared exactly) and assertions on what it shows — the T_group and
speedup values the analysis computes for the fixture, the GPU panes' latest values from the
real T4 trace, the replay's position. Snapshots only detect change; the content assertions
say what must be there."""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import pytest

from engine.events import read_events
from engine.results.load import load_runs
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.results import COLUMNS
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.screens.results import ResultsScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.device_charts import DeviceCharts
from fugue_tui.report.figures import build
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import FIXTURES, SIZE, await_snapshot, install


@pytest.fixture(autouse=True)
def pinned(tmp_path, monkeypatch):
    """UTC, colour on, no user keymap or datasets, a private working folder."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "no-data").mkdir()
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    yield
    monkeypatch.undo()
    time.tzset()


def _last_ts(run_dir) -> float:
    return max(e["ts"] for e in read_events(run_dir / "runner.jsonl"))


def _rows(table) -> list[list[str]]:
    return [[str(v) for v in table.get_row_at(i)] for i in range(table.row_count)]


async def _settle(pilot, predicate, what: str):
    """Wait for ``predicate``, then until the screen stops changing."""
    value = await until(pilot, predicate, timeout=20, what=what)
    before = None
    for _ in range(40):
        await pilot.pause(0.3)
        now = screen_text(pilot.app)
        if now == before:
            break
        before = now
    return value


def test_plan_screen(tmp_path, monkeypatch):
    # Cell keys include the plugins this process loaded; tests that ran before may have
    # loaded the test plugin, so start from none (the recorded fixture had none).
    from engine import plugins

    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.delenv("FUGUE_PLUGINS", raising=False)
    # The title's self-check line reads runs/selfcheck.csv: as on a machine never checked
    # (a developer's own verdict there must not change the snapshot).
    from engine.selfcheck import store

    monkeypatch.setattr(store, "latest", lambda *args, **kwargs: None)

    async def scenario():
        app = FugueApp(runs_dir="runs", clock=lambda: 1_800_000_000.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen)
                        and "D_reg" in screen_text(app), timeout=20, what="the catalogue")
            await pilot.press("a")  # every experiment that runs here
            await _settle(pilot, lambda: "preview: 5 cells: 5 run, 0 skipped"
                          in screen_text(app), "the preview")
            text = screen_text(app)
            for exp_id in ("D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"):
                assert exp_id in text
            # the runner's own cell keys (the recorded campaign has the same D_ens one): the
            # preview's table paints after its summary line, later still on a loaded host
            # (the assertion right after the settle failed once in a full run)
            await until(pilot, lambda: "7b9b25845f62ef9f" in screen_text(app)
                        and "unavailable: CIFAR-10 not" in screen_text(app), timeout=20,
                        what="the preview's cell keys")
            # then until nothing moves (the footer follows the focus, the table's last
            # paint): it differed once under load with no diff kept
            await _settle(pilot, lambda: True, "a still screen")
            await await_snapshot(pilot, app, "plan", tmp_path)

    asyncio.run(scenario())


def test_run_screen_of_a_recorded_campaign(tmp_path):
    runs = install(tmp_path)
    run = runs / "speed"
    expected = load_runs(runs).groups
    expected = expected[expected["campaign_id"] == "speed"]

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: _last_ts(run) + 10)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _settle(pilot, lambda: isinstance(app.screen, RunScreen)
                                   and app.screen.query_one(CellTable).row_count == 20
                                   and app.screen, "the 20 cells")
            rows = _rows(screen.query_one(CellTable))
            # the T_group column is the cells' own summaries: the rows' T_group, rounded
            shown = [r[7] for r in rows]
            assert shown == [f"{t:.2f} s" for t in expected["T_group"]]
            assert [r[4] for r in rows] == ["done"] * 20
            text = screen_text(app)
            assert "campaign speed · cpu" in text and "cells 20/20: 20 done" in text
            assert "finished (done, ok)" in text
            # the recent lines end with the campaign's end (its note is appended after the
            # last cell's): a snapshot taken before that note is drawn differs from one taken
            # after (it failed once in a full run)
            await until(pilot, lambda: "campaign finished, exit code 0" in screen_text(app),
                        timeout=30, what="the campaign's end in the recent lines")
            # the first cell: its jobs and its monitor (no GPU: the process tree's CPU, RSS)
            await pilot.press("g")
            await until(pilot, lambda: "D_ens_ens_s0" in screen_text(app), what="jobs")
            await pilot.pause(0.3)
            text = screen_text(app)
            # the cell ended: its monitor's latest value is its last, not "now"
            assert "CPU % of one core (cell process tree, no GPU)  last" in text
            # the speedup strip is computed off the UI thread: wait for it, or the snapshot
            # races it (it failed once in a full run)
            await until(pilot, lambda: "D_cv unified_model" in screen_text(app)
                        and "speedup so far:" in screen_text(app), timeout=30,
                        what="the speedup strip")
            await pilot.pause(0.3)
            await await_snapshot(pilot, app, "run_recorded", tmp_path)
            await pilot.press("q")

    asyncio.run(scenario())


def test_gpu_panes_from_the_real_t4_trace(tmp_path):
    shutil.copy(FIXTURES / "t4_stream.jsonl", tmp_path / "t4_stream.jsonl")
    last = [e for e in read_events(tmp_path / "t4_stream.jsonl") if e["type"] == "sample"][-1]

    async def scenario():
        app = FugueApp(replay="t4_stream.jsonl", replay_speed=500)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen)
            await pilot.press("E")  # to the end
            await _settle(pilot, lambda: screen.replay.done
                          and "last" in screen_text(app), "the trace's samples")
            await pilot.press("g")
            charts = screen.query_one(DeviceCharts)
            charts._drawn, charts._last_draw = None, float("-inf")  # draw the whole trace now
            screen.dirty = True
            screen.refresh_view()
            await _settle(pilot, lambda: charts.draws > 0, "the charts")
            text = screen_text(app)
            assert f"GPU utilisation %  last {last['gpu_util_pct']:.3g}" in text
            assert f"VRAM used MiB  last {last['mem_used_mib']:.3g}" in text
            assert f"GPU power W  last {last['power_w']:.3g}" in text
            assert "cuda:0 (Tesla T4, trace)" in text
            assert "replay · 101/101 events" in text and "finished" in text
            await await_snapshot(pilot, app, "run_gpu_t4_trace", tmp_path)

    asyncio.run(scenario())


def test_replay_steps_through_a_campaign_as_it_happened(tmp_path):
    runs = install(tmp_path)
    run = runs / "speed"

    async def scenario():
        app = FugueApp(runs_dir=str(runs))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen))
            screen = app.open_replay(run, paused=True)
            total = len(screen.replay.events)
            await pilot.pause(0.3)
            start = screen.replay.pos
            for _ in range(4):
                await pilot.press("n")
            # The run screen redraws at most twice a second: wait for the text to show the
            # position, not only for the model to reach it (0.3 s of unchanged text can fall
            # between two redraws) — and for all four steps (under load the fourth key can
            # land after the text showed the third: failed once in CI).
            await _settle(pilot, lambda: screen.replay.pos == start + 4 and (
                f"replay · {screen.replay.pos}/{total} events" in screen_text(app)), "four steps")
            text = screen_text(app)
            assert f"replay · {screen.replay.pos}/{total} events" in text and "paused" in text
            table = screen.query_one(CellTable)
            applied = screen.replay.events[:screen.replay.pos]
            assert table.row_count == sum(e["type"] == "queued" for e in applied) > 0
            await await_snapshot(pilot, app, "replay_paused", tmp_path)
            await pilot.press("E")
            await _settle(pilot, lambda: screen.replay.done
                          and "cells 20/20: 20 done" in screen_text(app), "the end")
            # the same code path as live: the same T_group values as the attached view
            groups = load_runs(runs).groups
            speed = groups[groups["campaign_id"] == "speed"]
            assert [r[7] for r in _rows(table)] == [f"{t:.2f} s" for t in speed["T_group"]]
            assert f"replay · {total}/{total} events" in screen_text(app)

    asyncio.run(scenario())


def test_results_screen_on_the_harness_files(tmp_path):
    shutil.copytree(FIXTURES / "harness", tmp_path / "harness")

    async def scenario():
        app = FugueApp(results="harness")  # relative: the screen shows the path as given
        async with app.run_test(size=SIZE) as pilot:
            screen = await _settle(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                   and app.screen.results is not None and app.screen,
                                   "the harness rows")
            text = screen_text(app)
            assert "12 of 12 group rows · 1 machine" in text
            for exp_id, speedup in (("D_ens", "1.464"), ("D_cv", "1.236"), ("D_hpo", "1.113")):
                assert f"{exp_id} unified_model vf:1,s:1,fl:1 {speedup}" in text
            assert "AMD EPYC (2 cores)" in text  # the selected row's provenance
            await await_snapshot(pilot, app, "results_harness", tmp_path)
            # filter and sort from the keyboard
            await pilot.press("slash")
            await pilot.press(*"exec:unified", "enter")
            await _settle(pilot, lambda: screen.shown is not None
                          and len(screen.shown.groups) == 6, "the filter")
            assert "6 of 12 group rows" in screen_text(app)
            screen.sort_by("T_group")
            await pilot.pause(0.2)
            at = [key for key, _, _ in COLUMNS].index("T_group")
            times = [float(r[at]) for r in _rows(screen.query_one("#groups"))]
            assert times == sorted(times) and len(times) == 6
            await pilot.press("O")
            await pilot.pause(0.2)
            assert [float(r[at]) for r in _rows(screen.query_one("#groups"))] == \
                sorted(times, reverse=True)

    asyncio.run(scenario())


def test_results_screen_of_our_recording_updates_as_rows_land(tmp_path):
    runs = install(tmp_path)
    results = build(load_runs(runs))
    table = results.table
    live = tmp_path / "live"
    live.mkdir()
    lines = (runs / "master_groups.csv").read_text().splitlines(keepends=True)
    (live / "master_groups.csv").write_text("".join(lines[:4]))  # header + 3 rows
    shutil.copy(runs / "master_individual.csv", live / "master_individual.csv")

    async def scenario():
        app = FugueApp(results="live")  # relative: the screen shows the path as given
        async with app.run_test(size=SIZE) as pilot:
            screen = await _settle(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                   and app.screen.results is not None and app.screen,
                                   "three rows")
            assert "3 of 3 group rows" in screen_text(app)
            with open(live / "master_groups.csv", "a") as out:
                out.writelines(lines[4:])  # the rest of the campaign lands
            await _settle(pilot, lambda: len(screen.shown.groups) == len(lines) - 1,
                          "the new rows")
            text = screen_text(app)
            assert f"{len(lines) - 1} of {len(lines) - 1} group rows" in text
            charts = screen.query_one("#figures").content.plain  # the whole pane, scrolled
            # the speedups and intervals the analysis computes for this fixture (ablation
            # rungs are cells of their own, never pooled with the plain unified cells)
            for row in table[table["executor"] != "seq"].to_dict("records"):
                if row["n_strategy"] >= 5:
                    label = f"{row['exp_id']} unified_model vf:1,s:0,fl:0"
                    value = f"{row['speedup']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
                    assert f"{label} {value}" in charts, (label, value)
            assert "D_ens unified_model vf:1,s:0,fl:0 rung B" in charts
            assert "ablation ladder" in charts
            for row in results.ladder.to_dict("records"):
                assert f"D_ens rung {row['rung']} {row['relative']:.3f}" in charts
            await await_snapshot(pilot, app, "results_recorded", tmp_path)

    asyncio.run(scenario())


def test_results_export_from_the_dashboard(tmp_path):
    async def scenario():
        app = FugueApp(results=str(FIXTURES / "harness"))
        async with app.run_test(size=SIZE) as pilot:
            await _settle(pilot, lambda: isinstance(app.screen, ResultsScreen)
                          and app.screen.results is not None, "rows")
            await pilot.press("e")
            from textual.widgets import Input

            from fugue_tui.app.screens.modals import PathScreen
            from fugue_tui.app.screens.results import EXPORT_ARM_S

            await until(pilot, lambda: isinstance(app.screen, PathScreen))
            app.screen.query_one(Input).value = str(tmp_path / "figs")
            await pilot.pause(EXPORT_ARM_S)  # an Enter typed ahead of the dialog is refused
            await pilot.press("enter")
            await until(pilot, lambda: (tmp_path / "figs" / "results.tex").is_file(),
                        timeout=60, what="the export")
            # Again into the same folder: the dashboard asks before replacing (the command
            # line's "--overwrite" means nothing here), and "no" leaves the files alone.
            from fugue_tui.app.screens.modals import ConfirmScreen

            tex_file = tmp_path / "figs" / "results.tex"
            tex_file.write_text("mine")
            for answer in ("n", "y"):
                await pilot.press("e")
                await until(pilot, lambda: isinstance(app.screen, PathScreen))
                app.screen.query_one(Input).value = str(tmp_path / "figs")
                await pilot.pause(EXPORT_ARM_S)
                await pilot.press("enter")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen),
                            timeout=60, what="the question")
                assert "already holds speedup.png" in str(app.screen.question)
                await pilot.press(answer)
                if answer == "n":
                    await pilot.pause()
                    assert tex_file.read_text() == "mine"
            # the replacing export removes the old files before writing the new ones: the
            # file is absent in between (a read then raised FileNotFoundError: a flaky test)
            await until(pilot, lambda: tex_file.is_file() and tex_file.read_text() != "mine",
                        timeout=60, what="the replacing export")
        names = sorted(p.name for p in (tmp_path / "figs").iterdir())
        assert "speedup.png" in names and "speedup.svg" in names and "parity.svg" in names
        tex = (tmp_path / "figs" / "results.tex").read_text()
        assert r"\toprule" in tex and "1.464" in tex and "unified\\_model" in tex

    asyncio.run(scenario())


def test_fixture_events_are_real_recordings():
    """The recording's cells wrote their own events: every cell attempt has a summary with
    the T_group its row carries (nothing in the fixture was edited but paths)."""
    runs = FIXTURES / "runs"
    groups = load_runs(runs).groups
    summaries = {}
    for path in runs.glob("*/cells/*/attempt-*/events.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "summary":
                summaries[event["cell"]] = event["T_group"]
    assert len(summaries) == len(groups)
    for row in groups.to_dict("records"):
        assert summaries[row["cell_key"]] == pytest.approx(row["T_group"], rel=1e-6)


def test_command_palette_entries_render_on_every_screen(tmp_path):
    """Each palette entry's help names its key; a key like "/" must not be read as markup
    (it crashed Ctrl+P on the results screen)."""
    from rich.text import Text

    async def scenario():
        app = FugueApp(results=str(FIXTURES / "harness"))
        async with app.run_test(size=SIZE) as pilot:
            await _settle(pilot, lambda: isinstance(app.screen, ResultsScreen)
                          and app.screen.results is not None, "rows")
            commands = list(app.get_system_commands(app.screen))
            helps = [Text.from_markup(c.help).plain for c in commands if c.title != "Theme"]
            assert helps and all(h.endswith("]") for h in helps), helps
            assert any(h.endswith("[/]") for h in helps)  # the filter key, shown literally
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press("escape")

    asyncio.run(scenario())
