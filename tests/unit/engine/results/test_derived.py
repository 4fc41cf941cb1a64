"""engine.results.derived: every derived metric declared once (name, unit, baseline rule,
doc, compute), computed by the readers through it, its docs table pinned to the registry,
and its values equal to ones computed by hand from real fixture rows (the fugue harness's
own CSVs and the dashboard fixture's recorded campaign), missing always empty, never 0."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.results import derived as registry
from engine.results.advise import advise
from engine.results.analysis import SPEEDUP_COLUMNS, speedups
from engine.results.derived import BASELINE_EXECUTOR, DERIVED, derived
from engine.results.derived_doc import (
    DOC_BEGIN,
    DOCS_FILE,
    doc_table,
    main,
    with_doc_table,
)
from engine.results.knee import build_curve, find_knee, gain_per_doubling
from engine.results.load import load_runs

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
HARNESS = FIXTURES / "fugue-harness-cpu"
DASHBOARD = FIXTURES / "dashboard" / "runs"


def _rows(folder: Path, name: str = "master_groups.csv") -> list[dict[str, str]]:
    with open(folder / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _mean(values) -> float:
    return statistics.fmean(float(v) for v in values)


# --------------------------------------------------------------------------- the registry

def test_each_metric_is_declared_once_with_unit_baseline_doc_and_compute():
    names = [d.name for d in DERIVED]
    assert len(names) == len(set(names))
    for d in DERIVED:
        assert d.unit and d.of and d.baseline and d.doc, d.name
        assert callable(d.compute), d.name
        assert "\n" not in d.doc and "|" not in d.doc + d.baseline + d.of, d.name
    # the analysis's table carries the metrics it computes under the registry's names
    for name in ("speedup", "ttb_speedup", "energy_per_model_j", "parity"):
        assert name in SPEEDUP_COLUMNS
    assert {"speedup", "e2e_speedup", "ttb_speedup", "energy_per_model_j", "knee",
            "best_k", "gain_per_doubling", "time_to_best_s"} <= set(names)
    with pytest.raises(KeyError, match="known: speedup"):
        derived("speedups")


def test_the_knee_module_computes_through_the_registry():
    # one function, not a copy: the old import paths name the registry's
    assert find_knee is derived("knee").compute
    assert gain_per_doubling is derived("gain_per_doubling").compute


def test_docs_table_is_the_registrys():
    text = DOCS_FILE.read_text(encoding="utf-8")
    assert main(["--check"]) == 0
    assert doc_table() in text and DOC_BEGIN in text
    for d in DERIVED:
        assert f"| `{d.name}` | {d.unit} |" in text


def test_docs_table_check_fails_when_the_registry_drifts(monkeypatch, capsys):
    changed = DERIVED[:1] + (registry.Derived("new_metric", "×", "T_group", "none",
                                              "a metric the doc does not have", len),)
    monkeypatch.setattr("engine.results.derived_doc.DERIVED", changed)
    text = DOCS_FILE.read_text(encoding="utf-8")
    assert with_doc_table(text) != text
    assert main(["--check"]) == 1
    assert "python -m engine.results.derived_doc" in capsys.readouterr().err
    with pytest.raises(ValueError, match="markers"):
        with_doc_table("no markers here")


# --------------------------------------------------------------------------- values by hand

def test_speedup_of_the_harness_rows_is_the_ratio_of_means_by_hand():
    rows = [r for r in _rows(HARNESS) if r["T_group"]]
    table = speedups(load_runs(HARNESS), n_boot=0)
    readme = {"D_ens": 1.464, "D_cv": 1.236, "D_hpo": 1.113}  # the fixture's README
    for exp, expected in readme.items():
        seq = _mean(r["T_group"] for r in rows
                    if r["exp_id"] == exp and r["executor"] == BASELINE_EXECUTOR)
        mine = _mean(r["T_group"] for r in rows
                     if r["exp_id"] == exp and r["executor"] == "unified_model")
        cell = table[(table["exp_id"] == exp) & (table["executor"] == "unified_model")]
        assert float(cell["speedup"].iloc[0]) == pytest.approx(seq / mine, rel=1e-12)
        assert round(seq / mine, 3) == expected
        own = table[(table["exp_id"] == exp) & (table["executor"] == BASELINE_EXECUTOR)]
        assert float(own["speedup"].iloc[0]) == 1.0


def test_speedup_without_a_baseline_is_missing_never_zero():
    assert math.isnan(derived("speedup").compute(float("nan"), 2.0))
    assert math.isnan(derived("speedup").compute(3.0, 0.0))  # inf: no ratio
    out = derived("speedup").compute(np.array([3.0, np.nan]), np.array([2.0, 1.0]))
    assert out[0] == 1.5 and math.isnan(out[1])


def test_harness_energy_zero_is_unmeasured_so_energy_per_model_is_empty():
    # the harness writes energy_group = 0 on seq rows without NVML: not measured
    assert {r["energy_group"] for r in _rows(HARNESS) if r["executor"] == "seq"} == {"0"}
    table = speedups(load_runs(HARNESS), n_boot=0)
    assert table["energy_per_model_j"].isna().all()
    assert (table["energy_n"] == 0).all()


def test_energy_per_model_by_hand_on_real_rows_with_energy():
    runs = load_runs(DASHBOARD)
    g = runs.groups
    plain = (g["exp_id"] == "D_ens") & (g["executor"] == "unified_model") \
        & (g["rung"].fillna("") == "")
    index = g.index[plain]
    energies = [400.0, 520.0, np.nan, 610.0, 455.0][:len(index)]
    g.loc[index, "energy_group"] = energies
    k = float(g.loc[index[0], "K"])
    cell = speedups(runs, n_boot=0)
    cell = cell[(cell["exp_id"] == "D_ens") & (cell["executor"] == "unified_model")
                & (cell["rung"].fillna("") == "")]
    measured = [e / k for e in energies if not math.isnan(e)]
    assert float(cell["energy_per_model_j"].iloc[0]) == pytest.approx(_mean(measured),
                                                                      rel=1e-12)
    assert int(cell["energy_n"].iloc[0]) == len(measured)
    # the K-sweep curves form each point's energy with the same function
    rows = g[plain].assign(K=g.loc[plain, "K"].to_numpy() * np.array(
        [1, 2, 1, 2, 1][:len(index)]))
    rows = rows.assign(train_throughput_sps=rows["throughput_group"],
                       rss_peak_mb=np.nan, config_key="")
    curve = build_curve({}, {"exp_id": "D_ens", "executor": "unified_model"}, rows, n_boot=0)
    assert curve is not None
    at_k = [e / k for e, m in zip(energies, [1, 2, 1, 2, 1], strict=True) if m == 1 and not math.isnan(e)]
    assert curve.point(int(k)).energy_per_model_j == pytest.approx(_mean(at_k), rel=1e-12)


def test_energy_per_model_scalar_and_series_agree_and_missing_stays_missing():
    compute = derived("energy_per_model_j").compute
    energy = pd.Series([100.0, 100.0, np.nan, 100.0, 100.0])
    k = pd.Series([4.0, 0.0, 4.0, np.nan, -1.0])
    series = compute(energy, k)
    assert series.iloc[0] == 25.0 and series.iloc[1:].isna().all()
    for e, kk, s in zip(energy, k, series, strict=True):
        scalar = compute(e, kk)
        assert (math.isnan(scalar) and math.isnan(s)) or scalar == s
    assert math.isnan(compute(None, 4)) and math.isnan(compute("", 4))
    assert compute(100, 4) == 25.0


def test_parity_of_the_harness_jobs_by_hand():
    jobs = _rows(HARNESS, "master_individual.csv")
    table = speedups(load_runs(HARNESS), n_boot=0)
    for exp in ("D_ens", "D_cv", "D_hpo"):
        within = []
        for metric in ("final_val_acc", "final_val_loss"):  # fp32 rows: no widening
            seq = [float(j[metric]) for j in jobs
                   if j["exp_id"] == exp and j["executor"] == BASELINE_EXECUTOR]
            mine = _mean(j[metric] for j in jobs
                         if j["exp_id"] == exp and j["executor"] == "unified_model")
            within.append(min(seq) - 1e-12 <= mine <= max(seq) + 1e-12)
            cell = table[(table["exp_id"] == exp) & (table["executor"] == "unified_model")]
            column = "acc_mean" if metric == "final_val_acc" else "loss_mean"
            assert float(cell[column].iloc[0]) == pytest.approx(mine, rel=1e-12)
        want = "within seq spread" if all(within) else "outside seq spread"
        assert cell["parity"].iloc[0] == want
    assert list(derived("parity").compute([0.5], [np.nan], [np.nan])["parity"]) == ["n/a"]


def test_end_to_end_speedup_of_the_dashboard_rows_by_hand():
    rows = [r for r in _rows(DASHBOARD) if r["status"] == "ok" and not r["rung"]
            and r["exp_id"] == "D_cv"]

    def total(executor):
        return _mean(float(r["setup_s"]) + float(r["T_group"]) for r in rows
                     if r["executor"] == executor)
    advice = [a for a in advise(load_runs(DASHBOARD), n_boot=0) if a.exp_id == "D_cv"]
    options = [o for a in advice for o in (a.recommended, a.runner_up)
               if o is not None and o.executor == "unified_model"]
    assert options
    assert options[0].e2e_speedup == pytest.approx(
        total(BASELINE_EXECUTOR) / total("unified_model"), rel=1e-12)


def test_ladder_is_relative_to_rung_a_by_hand():
    from fugue_tui.report.figures import ladder_table

    rows = [r for r in _rows(DASHBOARD) if r["status"] == "ok" and r["rung"]]
    base = _mean(r["throughput_group"] for r in rows if r["rung"] == "A")
    ladder = ladder_table(load_runs(DASHBOARD), n_boot=0)
    for rung in ("A", "B", "C+FL"):
        mine = _mean(r["throughput_group"] for r in rows if r["rung"] == rung)
        got = float(ladder.loc[ladder["rung"] == rung, "relative"].iloc[0])
        assert got == pytest.approx(mine / base, rel=1e-12)
    assert math.isnan(derived("relative").compute(10.0, None))
    assert math.isnan(derived("relative").compute(10.0, 0.0))


def test_knee_gain_and_best_k_by_hand():
    ks, xs = [1, 2, 4, 8, 16], [100.0, 190.0, 350.0, 370.0, 375.0]
    assert derived("gain_per_doubling").compute(2, 190.0, 8, 370.0) == pytest.approx(
        (370.0 / 190.0) ** 0.5 - 1, rel=1e-15)
    assert derived("knee").compute(ks, xs, 0.10) == 4
    assert derived("knee").compute(ks, [100.0, 200.0, 400.0, 800.0, 1600.0], 0.10) is None
    assert derived("best_k").compute(ks, xs) == 16


def test_time_to_best_is_the_stored_columns_rule():
    trials = [("t0", [(1.0, 0.9), (2.0, 0.5), (3.0, 0.499)]), ("t1", [(1.5, 0.7)])]
    assert derived("time_to_best_s").compute(trials, "min") == 2.0  # 0.5 within 1 %
    assert math.isnan(derived("time_to_best_s").compute([("t0", [])], "min"))


def test_tensorboard_export_draws_energy_per_model_through_the_registry(tmp_path):
    pytest.importorskip("tensorboardX")
    from fugue_tui.report.export_data import write_tensorboard
    from tests.unit.fugue_tui.report.test_export_data import _scalars

    runs = load_runs(DASHBOARD)
    g = runs.groups
    first = g.index[(g["exp_id"] == "D_cv") & (g["executor"] == "unified_model")][0]
    g.loc[first, "energy_group"] = 123.0
    runs = type(runs)(g.loc[[first]], runs.jobs.iloc[0:0], list(runs.sources))
    write_tensorboard(runs, tmp_path)
    drawn = [v for folder in tmp_path.rglob("group")
             for _, v in _scalars(folder).get("group/energy_per_model_j", [])]
    assert drawn == [pytest.approx(123.0 / float(g.loc[first, "K"]))]
