"""Speedups per precision compare like with like (issue 26): a bf16 unified_model cell
divides bf16 seq rows, never fp32 ones; ``fugue-tui report --baseline fp32`` shows every
precision, seq's own included, against fp32 seq (speedup and accuracy parity). Rows without
a ``precision`` (the fugue harness's) count as what their ``amp`` says."""

from __future__ import annotations

import pandas as pd

from engine.results.analysis import speedups
from engine.results.load import runs_from_frames
from fugue_tui.format import MISSING
from fugue_tui.report.cell_tables import cell_values as _cell_values
from fugue_tui.report.figures import cell_label


def _row(executor: str, t: float, precision: str, group: str) -> dict:
    return {"exp_id": "D_ens", "executor": executor, "T_group": str(t), "status": "ok",
            "precision": precision, "config_key": f"{executor}-{precision}",
            "compile_mode": "off", "host": "m", "pass": "1", "group_id": group,
            "workload_key": "w", "K": "2"}


def _job(group: str, acc: float) -> dict:
    return {"group_id": group, "status": "ok", "final_val_acc": str(acc)}


def _runs():
    groups = [_row("seq", 8.0, "fp32", "g1"), _row("seq", 4.0, "bf16", "g2"),
              _row("unified_model", 2.0, "fp32", "g3"), _row("unified_model", 0.5, "bf16", "g4")]
    jobs = [_job("g1", 0.90), _job("g1", 0.92), _job("g2", 0.80), _job("g2", 0.82),
            _job("g3", 0.91), _job("g4", 0.81)]
    return runs_from_frames(pd.DataFrame(groups), pd.DataFrame(jobs))


def test_each_precision_is_divided_by_seq_of_the_same_precision():
    table = speedups(_runs(), n_boot=0).set_index(["executor", "precision"])
    assert table.loc[("unified_model", "fp32"), "speedup"] == 4.0  # 8 / 2
    assert table.loc[("unified_model", "bf16"), "speedup"] == 8.0  # 4 / 0.5, not 8 / 0.5
    assert table.loc[("seq", "bf16"), "speedup"] == 1.0
    assert table.loc[("unified_model", "bf16"), "baseline"] == "seq bf16"
    assert table.loc[("unified_model", "fp32"), "baseline"] == "seq"
    # accuracy parity against the same precision's seq jobs: 0.81 within [0.80, 0.82]
    assert table.loc[("unified_model", "bf16"), "parity"] == "within seq spread"


def test_baseline_fp32_puts_every_precision_against_fp32_seq():
    table = speedups(_runs(), n_boot=0, baseline_precision="fp32") \
        .set_index(["executor", "precision"])
    assert table.loc[("seq", "bf16"), "speedup"] == 2.0  # bf16 seq itself: 8 / 4
    assert table.loc[("unified_model", "bf16"), "speedup"] == 16.0  # 8 / 0.5
    assert table.loc[("seq", "fp32"), "speedup"] == 1.0
    assert set(table["baseline"]) == {"seq fp32"}
    # bf16's accuracy is outside fp32 seq's spread [0.90, 0.92]: the figure says so
    assert table.loc[("unified_model", "bf16"), "parity"] == "outside seq spread"


def test_labels_name_the_precision_and_harness_rows_count_as_their_amp():
    table = speedups(_runs(), n_boot=0)
    labels = {cell_label(r) for r in table.to_dict("records")}
    assert labels == {"D_ens seq", "D_ens seq bf16", "D_ens unified_model",
                      "D_ens unified_model bf16"}
    variants = sorted(_cell_values(r)["variant"] for r in table.to_dict("records"))
    assert variants == sorted([MISSING, MISSING, "bf16", "bf16"])
    harness = runs_from_frames(pd.DataFrame([{"exp_id": "E01", "executor": "seq",
                                              "amp": "True", "T_group": "1"},
                                             {"exp_id": "E05", "executor": "seq",
                                              "amp": "False", "T_group": "1"}]))
    assert list(harness.groups["precision"]) == ["amp-fp16", "fp32"]


def test_report_baseline_flag(tmp_path, capsys, monkeypatch):
    from fugue_tui.cli import main

    runs = _runs()
    runs.groups.drop(columns=[c for c in runs.groups.columns if c in ("row", "machine")]) \
        .to_csv(tmp_path / "master_groups.csv", index=False)
    pd.DataFrame([_job(g, a) for g, a in (("g1", 0.9), ("g2", 0.8), ("g3", 0.9), ("g4", 0.8))]) \
        .to_csv(tmp_path / "master_individual.csv", index=False)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["report", str(tmp_path), "--baseline", "fp32", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "seq fp32" in out and "16.000" in out
    assert "against seq in fp32 for every precision" in out
    assert main(["report", str(tmp_path), "--baseline", "fp8"]) == 2  # usage: exit 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "'fp8'" in err
