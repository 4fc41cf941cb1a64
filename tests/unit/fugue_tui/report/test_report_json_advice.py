"""``fugue-tui report --json`` carries the K sweeps' knee data and the advisor's advice
(issues 23, 29): validated against the report schema (docs/json.md) with a strict parser,
and checked against what the text report says. Nothing trains here."""

from __future__ import annotations

import io
import json
import shutil

import jsonschema
from rich.console import Console

from fugue_tui.jsonout import schema
from fugue_tui.report.tables import print_report, run_report
from tests.unit.engine.results.test_analysis import HARNESS
from tests.unit.engine.results.test_knee import TP, _sweep
from tests.unit.fugue_tui.test_json_outputs import fugue, strict


def _doc(capsys, runs_dir, **kw) -> dict:
    assert run_report(runs_dir, as_json=True, **kw) == 0
    out = capsys.readouterr().out
    doc = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    jsonschema.validate(doc, schema("report"), cls=jsonschema.Draft202012Validator)
    return doc


def test_sweep_knee_data_and_advice_in_the_json(tmp_path, capsys):
    _sweep(tmp_path, seq={1: 100, 2: 101, 4: 100, 8: 99, 16: 100}, unified_model=dict(TP))
    doc = _doc(capsys, tmp_path, advise=True)
    assert doc["knee_fraction"] == 0.1
    by_exec = {c["executor"]: c for c in doc["sweeps"]}
    uni = by_exec["unified_model"]
    assert uni["exp_id"] == "D_ens" and uni["machine"] == "hostA"
    assert uni["knee"] == 4 and uni["best_k"] == 16 and by_exec["seq"]["knee"] == 1
    assert [p["K"] for p in uni["points"]] == [1, 2, 4, 8, 16]
    assert [p["throughput"] for p in uni["points"]] == [100, 190, 350, 370, 375]
    assert uni["points"][0]["gain_per_doubling"] is None  # nothing before K = 1
    assert abs(uni["points"][1]["gain_per_doubling"] - 0.9) < 1e-9
    assert uni["points"][2]["marks"] == ["knee"] and uni["points"][4]["marks"] == ["best"]
    assert {k["fraction"]: k["K"] for k in uni["knees"]} == {0.05: 8, 0.1: 4, 0.2: 4,
                                                           0.3: 4}
    # one pass: no interval is invented
    assert uni["has_intervals"] is False and uni["knee_low"] is None
    assert uni["points"][2]["low"] is None and uni["points"][2]["energy_per_model_j"] is None
    (advice,) = doc["advice"]
    rec = advice["recommended"]
    assert advice["swept"] is True and rec["executor"] == "unified_model" and rec["K"] == 4
    assert rec["throughput"] == 350 and advice["runner_up"]["executor"] == "seq"
    assert advice["distinguishable"] is None  # no interval with one pass
    text = io.StringIO()
    print_report(tmp_path, Console(file=text, width=150, color_system=None), advise=True)
    for line in advice["lines"]:  # the same words as the text report
        assert line.strip() in text.getvalue()
    # the rule moves the knee in the document too; without --advise: advice null
    moved = _doc(capsys, tmp_path, knee_fraction="0.05")
    assert {c["executor"]: c["knee"] for c in moved["sweeps"]}["unified_model"] == 8
    assert moved["advice"] is None and moved["knee_fraction"] == 0.05


def test_intervals_with_five_passes(tmp_path, capsys):
    _sweep(tmp_path, passes=5, noise=0.02, seq={1: 100, 2: 100, 4: 100},
           unified_model={1: 100, 2: 190, 4: 200})
    doc = _doc(capsys, tmp_path, advise=True)
    uni = next(c for c in doc["sweeps"] if c["executor"] == "unified_model")
    assert uni["has_intervals"] is True and uni["knee"] == 2
    for point in uni["points"]:
        assert point["low"] <= point["throughput"] <= point["high"] and point["n"] == 5
    (advice,) = doc["advice"]
    assert advice["distinguishable"] is True and advice["more_passes"] is None
    assert advice["recommended"]["score_low"] > advice["runner_up"]["score_high"]


def test_no_sweep_advice_from_speedups_as_a_subprocess(tmp_path):
    shutil.copy(HARNESS / "master_groups.csv", tmp_path / "master_groups.csv")
    proc = fugue("report", str(tmp_path), "--json", "--advise")
    assert proc.returncode == 0, proc.stderr
    doc = strict(proc.stdout, "report")
    assert doc["sweeps"] == []
    d_ens = next(a for a in doc["advice"] if a["exp_id"] == "D_ens")
    assert d_ens["swept"] is False and d_ens["recommended"]["executor"] == "unified_model"
    assert abs(d_ens["recommended"]["speedup"] - 1.464) < 1e-3  # the harness's figure
    assert d_ens["recommended"]["K"] == 4 and d_ens["passes"] == [2, 2]
