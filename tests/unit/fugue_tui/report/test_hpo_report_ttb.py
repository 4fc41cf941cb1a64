"""Time to best in ``fugue-tui report`` and ``report --export`` (issue 25): the table per
hpo workload, the best-so-far terminal chart, ``best_so_far.csv`` and the figure.
Synthetic rows with known answers; nothing trains here."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from engine.results.hpo_curves import hpo_cells
from engine.results.load import load_runs
from fugue_tui.report.points import step_points
from fugue_tui.report.tables import export_results, print_report
from tests.unit.engine.results.test_analysis import group as base_group
from tests.unit.engine.results.test_analysis import job, write


def _hpo(executor, n, ttb, curve, best_trial, stopped=0, t=10.0):
    info = json.dumps({"best_so_far": {"metric": "val_loss", "mode": "min", "epsilon": 0.01,
                                       "curve": curve}}) if curve else ""
    return base_group("D_hpo", executor, t, gpu="", cuda="", k=3, scheduler="sha",
                      mode="hpo", executor_info=info, time_to_best_s=ttb,
                      best_val_metric=curve[-1][1] if curve else "", best_trial=best_trial,
                      trials_stopped=stopped, workload_key="w", config_key=executor,
                      **{"pass": n})


def _runs(tmp_path):
    groups = [
        _hpo("seq", 1, 6.0, [[1.0, 0.9], [3.0, 0.5], [6.0, 0.40]], "t2", 1),
        _hpo("seq", 2, 8.0, [[1.0, 0.8], [8.0, 0.41]], "t2", 1),
        _hpo("unified_model", 1, 2.0, [[0.5, 0.7], [2.0, 0.40]], "t2", 1, t=5.0),
        _hpo("unified_model", 2, 4.0, [[0.5, 0.6], [4.0, 0.42]], "t1", 1, t=5.0),
        _hpo("unified_model", 3, 3.0, [[0.5, 0.6], [3.0, 0.40]], "t2", 1, t=5.0),
        _hpo("unified_model", 4, "", [], "", None, t=5.0),  # no validation: no curve
    ]
    jobs = []
    for g in groups:  # the same decisions everywhere: t0 stopped at epoch 1
        for i in range(3):
            row = job(g, 0.5, i)
            row.update(job_id=f"t{i}", early_stopped=str(i == 0), epochs_run=1 if i == 0 else 4)
            jobs.append(row)
    return load_runs(write(tmp_path, groups, jobs))


def test_cells_aggregate_passes_and_pick_the_median_pass(tmp_path):
    (seq, uni) = sorted(hpo_cells(_runs(tmp_path)), key=lambda c: c.cell["executor"])
    assert uni.n == 4 and uni.ttb_mean == 3.0 and uni.ttb_range == (2.0, 4.0)
    assert uni.best_trial == ("t2", 2) and uni.metric == "val_loss"
    assert uni.representative.pass_index == 3  # median of 2, 3, 4 s
    assert seq.representative.pass_index == 1  # lower median of 6, 8
    assert uni.passes[3].curve == () and uni.passes[3].time_to_best_s != uni.passes[3].time_to_best_s
    assert step_points([(1.0, 0.9), (3.0, 0.5)], end=10.0) == (
        [1.0, 3.0, 3.0, 10.0], [0.9, 0.9, 0.5, 0.5])


def test_report_prints_the_time_to_best_table_and_chart(tmp_path):
    _runs(tmp_path)
    out = io.StringIO()
    print_report(tmp_path, Console(file=out, width=160, color_system=None))
    text = out.getvalue()
    assert "D_hpo on hostA · no GPU: time to best" in text
    row = next(line for line in text.splitlines() if "unified_model sha" in line
               and "│" in line and "[2.00, 4.00]" in line)
    assert "3.00" in row and "2.33" in row and "t2 (2/4)" in row  # 7.0 / 3.0 = 2.33
    assert "seq sha" in row  # the baseline: seq under the same scheduler
    assert "D_hpo on hostA · no GPU: best so far" in text and "★ time to best" in text
    assert "unified_model sha (pass 3): best known at 3.00 s" in text
    no_chart = io.StringIO()
    print_report(tmp_path, Console(file=no_chart, width=160, color_system=None), chart=False)
    assert "time to best" in no_chart.getvalue() and "best so far" not in no_chart.getvalue()


def test_export_writes_the_curves_and_the_figure(tmp_path):
    runs = _runs(tmp_path / "runs")
    written = {p.name for p in export_results(runs, tmp_path / "out", "svg")}
    assert {"best_so_far.csv", "best_so_far.svg"} <= written and "best_so_far.png" not in written
    rows = list(csv.DictReader((tmp_path / "out" / "best_so_far.csv").open()))
    uni1 = [r for r in rows if r["executor"] == "unified_model" and r["pass"] == "1"]
    assert [(r["t_s"], r["best"]) for r in uni1] == [("0.5", "0.7"), ("2.0", "0.4")]
    assert uni1[0]["time_to_best_s"] == "2.0" and uni1[0]["metric"] == "val_loss"
    empty = [r for r in rows if r["executor"] == "unified_model" and r["pass"] == "4"]
    assert len(empty) == 1 and empty[0]["t_s"] == "" and empty[0]["time_to_best_s"] == ""
    assert "best so far" in (tmp_path / "out" / "best_so_far.svg").read_text()
    # no hpo rows: no best_so_far files
    plain = load_runs(write(tmp_path / "plain", [base_group("D_ens", "seq", 2.0)]))
    assert "best_so_far.csv" not in {p.name for p in export_results(plain, tmp_path / "o2",
                                                                     "tex")}


def test_hpo_rows_without_time_to_best_show_nothing(tmp_path):
    """The fugue harness's hpo rows (and ours from before issue 25) never measured it: no
    empty table, no best_so_far files."""
    from engine.results.load import load_runs as load
    from tests.unit.engine.results.test_analysis import HARNESS

    assert (load(HARNESS).groups["mode"] == "hpo").any()
    assert hpo_cells(load(HARNESS)) == []


def test_report_json_carries_the_hpo_curves(tmp_path, capsys):
    import jsonschema

    from fugue_tui.jsonout import schema
    from fugue_tui.report.tables import run_report

    _runs(tmp_path)
    assert run_report(tmp_path, as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("report"), cls=jsonschema.Draft202012Validator)
    uni = next(c for c in doc["hpo"] if c["executor"] == "unified_model")
    assert (uni["n"], uni["time_to_best_mean"], uni["time_to_best_min"]) == (4, 3.0, 2.0)
    assert (uni["best_trial"], uni["best_trial_passes"], uni["metric"]) == ("t2", 2, "val_loss")
    assert uni["passes"][0]["curve"] == [[0.5, 0.7], [2.0, 0.4]]
    assert uni["passes"][3]["curve"] == [] and uni["passes"][3]["time_to_best_s"] is None
    rep = next(p for p in uni["passes"] if p["group_id"] == uni["representative_group_id"])
    assert rep["pass"] == 3


def test_at_80_columns_the_time_to_best_table_folds_and_cuts_no_figure(tmp_path):
    """The main job's report is read at 80 columns: ten columns cut every figure (`0.07…`);
    folded, each figure of the row is whole."""
    _runs(tmp_path)
    out = io.StringIO()
    print_report(tmp_path, Console(file=out, width=80, color_system=None), chart=False)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "time to best" in line and "D_hpo" in line)
    table = lines[start:start + 20]
    row = next(i for i, line in enumerate(table) if "unified_model" in line and "3.00" in line)
    assert "3.00" in table[row] and "2.33" in table[row] and "t2 (2/4)" in table[row]
    assert "2.00–4.00" in table[row + 1] and "seq sha" in table[row + 1]
    assert all(len(line) <= 80 for line in table)
