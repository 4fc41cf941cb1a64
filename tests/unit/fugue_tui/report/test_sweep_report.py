"""``fugue-tui report`` on a K sweep (issue 23): the K column, the throughput-vs-K chart
with the knee marked, a table per curve, ``--advise``, ``--knee-fraction`` and the export
of the figure and table. Nothing trains here."""

from __future__ import annotations

import csv
import io
import shutil

from rich.console import Console

from fugue_tui.report.sweeps import analyse, charts
from fugue_tui.report.tables import export_results, print_report
from tests.unit.engine.results.test_analysis import HARNESS
from tests.unit.engine.results.test_knee import TP, _sweep


def _text(runs_dir, **kw) -> str:
    out = io.StringIO()
    print_report(runs_dir, Console(file=out, width=150, color_system=None), **kw)
    return out.getvalue()


def test_report_draws_the_curve_with_its_knee_and_a_table_per_curve(tmp_path):
    _sweep(tmp_path, seq={1: 100, 2: 101, 4: 100, 8: 99, 16: 100}, unified_model=dict(TP))
    text = _text(tmp_path)
    assert "┃  K ┃" in text and "│ unified_model │  8 │" in text  # the K column
    assert "D_ens unified_model K=8 3.737" in text  # the speedup bars name their K
    assert "D_ens on hostA · no GPU: training throughput vs K" in text
    assert "◆ knee" in text and "unified_model: knee K=4" in text and "seq: knee K=1" in text
    assert "D_ens unified_model: knee K = 4; best K = 16" in text
    assert "+90%" in text  # gain per doubling from K = 1 to 2
    assert "advice" not in text
    advised = _text(tmp_path, advise=True)
    assert "recommended: unified_model, K = 4 models at once (the knee)" in advised
    moved = _text(tmp_path, knee_fraction=0.05)
    assert "unified_model: knee K=8" in moved


def test_no_sweep_no_curve(tmp_path):
    shutil.copy(HARNESS / "master_groups.csv", tmp_path / "master_groups.csv")
    text = _text(tmp_path, advise=True)
    assert "throughput vs K" not in text and "┃  K ┃" not in text  # K only for a sweep
    assert "recommended: unified_model" in text  # advice without a sweep still comes


def test_export_writes_the_knee_figure_and_table(tmp_path):
    runs = _sweep(tmp_path / "runs", seq={1: 100, 2: 101, 4: 100}, unified_model={1: 100,
                                                                                  2: 190,
                                                                                  4: 200})
    written = {p.name for p in export_results(runs, tmp_path / "out", "svg")}
    assert {"knee.svg", "knee.csv"} <= written and "knee.png" not in written
    rows = list(csv.DictReader((tmp_path / "out" / "knee.csv").open()))
    assert [(r["strategy"], r["K"], r["mark"]) for r in rows] == [
        ("seq", "1", "knee"), ("seq", "2", "best"), ("seq", "4", ""),
        ("unified_model", "1", ""), ("unified_model", "2", "knee"),
        ("unified_model", "4", "best")]
    assert rows[0]["energy_per_model_j"] == "" and rows[0]["low"] == ""  # missing stays empty
    assert float(rows[4]["throughput"]) == 190.0
    svg = (tmp_path / "out" / "knee.svg").read_text()
    assert "knee K=2" in svg
    # no sweep: no knee files
    plain = _sweep(tmp_path / "plain", seq={5: 100}, unified_model={5: 300})
    assert "knee.csv" not in {p.name for p in export_results(plain, tmp_path / "out2", "tex")}


def test_chart_keeps_missing_throughput_out(tmp_path):
    runs = _sweep(tmp_path, unified_model={1: 100, 2: 190, 4: 350, 8: 370})
    view = analyse(runs, advise=False)
    (chart,) = charts(view, width=80, color=False)
    assert "knee K=4" in chart and chart.count("\n") > 10
