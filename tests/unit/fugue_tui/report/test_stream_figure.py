"""The ``completion`` figure (the Results screen and the exports): a stream campaign's
strategies on their jobs' p95 completion time, the figure report's streams table prints —
its T_group "speedup" (a ratio of makespans, dominated by the last arrival) said mp was
0.98x seq on the recorded stream whatever mp did."""

from __future__ import annotations

import asyncio
import csv

import pytest

from engine.results.load import load_runs
from engine.results.stream_report import stream_cells
from fugue_tui.report.export import export, skipped_figures
from fugue_tui.report.figures import FIGURE_KEYS, build
from tests.unit.fugue_tui.report.test_report_cli import HARNESS
from tests.unit.fugue_tui.report.test_report_stream_advice import STREAM_RUNS


def _figure(results, key):
    return next(f for f in results.figures if f.key == key)


def test_a_streams_strategies_are_drawn_on_their_p95_completion_time():
    runs = load_runs(STREAM_RUNS)
    results = build(runs, n_boot=0)
    assert FIGURE_KEYS[-1] == "completion"  # added at the end: exports' order kept
    bars = _figure(results, "completion").bars
    with (STREAM_RUNS / "master_groups.csv").open(newline="") as f:
        p95 = {r["executor"]: float(r["jct_p95_s"]) for r in csv.DictReader(f)}
    assert [b.label for b in bars] == ["stream seq", "stream mp"]  # seq first
    assert [b.value for b in bars] == pytest.approx([p95["seq"], p95["mp"]])
    assert [b.text for b in bars] == [f"{p95['seq']:.2f}", f"{p95['mp']:.2f}"]
    assert all(b.low is None for b in bars)  # one pass: no interval
    # the same numbers as report's streams table
    table = [c["figures"]["jct_p95_s"]["mean"] for c in stream_cells(runs.groups)]
    assert [b.value for b in bars] == pytest.approx(table)
    speedup = _figure(results, "speedup")
    assert "stream cells left out" in speedup.note
    assert not any(b.label.startswith("stream ") for b in speedup.bars)  # report's rule


def test_a_batch_has_no_completion_bars_and_the_export_says_why(tmp_path):
    from fugue_tui.app.widgets.figure_charts import shown_figures

    results = build(load_runs(HARNESS), n_boot=0)
    assert _figure(results, "completion").bars == []
    assert "stream cells left out" not in _figure(results, "speedup").note
    assert "completion" not in [f.key for f in shown_figures(results)]
    assert ("completion", "no stream campaign's rows (key 'arrivals')") in skipped_figures(results)
    written = export(results, tmp_path, ["svg"])
    assert not (tmp_path / "completion.svg").exists() and written
    streams = build(load_runs(STREAM_RUNS), n_boot=0)
    assert [f.key for f in shown_figures(streams)][:2] == ["completion", "wall_clock"]
    assert ("speedup", "stream cells only: a stream's T_group is its makespan; "
            "completion.png compares them") in skipped_figures(streams)
    assert (tmp_path / "s" / "completion.svg") in export(streams, tmp_path / "s", ["svg"])


def test_the_results_screen_leads_with_the_streams_completion_times(tmp_path, monkeypatch):
    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.screens.results import ResultsScreen
    from tests.app_screen import until
    from tests.snapshots.helpers import SIZE

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(results=str(STREAM_RUNS))
        async with app.run_test(size=SIZE) as pilot:
            figures = await until(
                pilot, lambda: isinstance(app.screen, ResultsScreen)
                and "wall-clock" in str(app.screen.query_one("#figures").content)
                and app.screen.query_one("#figures"), timeout=60, what="the figures")
            text = str(figures.content)
            first = text.index("p95 job completion time on each stream")
            assert first < text.index("wall-clock")
            # stream rows only: no speedup chart (report's speedup chart leaves them out too)
            assert "stream mp 5.17" in text and "speedup over seq" not in text

    asyncio.run(scenario())
