"""Parity beyond accuracy (issue 45): the parity verdict is ``within`` only when both the
cell's mean validation accuracy and its mean validation loss lie in seq's [min, max] over
passes, widened by the precision's band (docs/fidelity.md, "Precision"); when outside it
names which failed, in the analysis, the report's table and its JSON. Nothing trains."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
from rich.console import Console

from engine.results.analysis import speedups
from engine.results.load import runs_from_frames
from engine.results.parity_band import EXACT, HALF, PRECISION_BANDS, band
from fugue_tui.report.cell_tables import build_tables, cell_values

FIDELITY = Path(__file__).resolve().parents[4] / "docs" / "fidelity.md"


def _runs(*args, **kw):
    groups, jobs = _frames(*args, **kw)
    return runs_from_frames(pd.DataFrame(groups), pd.DataFrame(jobs))


def _frames(unified_loss: float | None, unified_acc: float = 0.80, precision: str = "fp32",
            seq_loss: tuple[float, float] | None = (0.85, 0.87)):
    """seq: two passes (acc 0.78 / 0.82); unified_model: one pass of two jobs. A loss of
    None: the rows carry no final_val_loss (written before it, or a task without one)."""
    def group(executor: str, gid: str) -> dict:
        return {"exp_id": "D_ens", "executor": executor, "T_group": "2.0", "status": "ok",
                "precision": precision, "config_key": executor, "compile_mode": "off",
                "host": "m", "pass": "1", "group_id": gid, "workload_key": "w", "K": "2"}

    def job(gid: str, acc: float, loss: float | None) -> dict:
        row = {"group_id": gid, "status": "ok", "final_val_acc": str(acc)}
        if loss is not None:
            row["final_val_loss"] = str(loss)
        return row

    low, high = seq_loss if seq_loss is not None else (None, None)
    groups = [group("seq", "g1"), group("seq", "g2"), group("unified_model", "g3")]
    jobs = [job("g1", 0.78, low), job("g1", 0.80, low), job("g2", 0.82, high),
            job("g2", 0.80, high), job("g3", unified_acc, unified_loss),
            job("g3", unified_acc, unified_loss)]
    return groups, jobs


def _cell(runs) -> dict:
    table = speedups(runs, n_boot=0)
    return table[table["executor"] == "unified_model"].to_dict("records")[0]


def test_accuracy_within_but_loss_far_outside_reads_outside_naming_loss():
    # the model: the same accuracy as seq, validation loss 1.88 against seq's 0.86
    cell = _cell(_runs(unified_loss=1.88))
    assert cell["acc_mean"] == 0.80 and cell["seq_loss_max"] == 0.87
    assert cell["loss_mean"] == 1.88
    assert cell["parity"] == "outside seq spread"
    assert cell["parity_failed"] == "loss" and cell["parity_on"] == "accuracy, loss"
    assert cell_values({**cell, "n_strategy": 1})["parity"] == "OUTSIDE (loss)"
    text = io.StringIO()
    for t in build_tables(pd.DataFrame([cell]), width=200):
        Console(file=text, width=200, color_system=None).print(t)
    assert "OUTSIDE (loss)" in text.getvalue()
    # both failing: both named
    both = _cell(_runs(unified_loss=1.88, unified_acc=0.60))
    assert both["parity_failed"] == "accuracy, loss"
    # inside both ranges: within, judged on both
    fine = _cell(_runs(unified_loss=0.86))
    assert fine["parity"] == "within seq spread" and fine["parity_failed"] is None
    assert fine["parity_on"] == "accuracy, loss"


def test_without_a_loss_the_verdict_is_on_accuracy_alone_and_says_so():
    cell = _cell(_runs(unified_loss=None))
    assert cell["parity"] == "within seq spread" and cell["parity_on"] == "accuracy"
    assert cell_values({**cell, "n_strategy": 1})["parity"] == "within (acc only)"
    older = _cell(_runs(unified_loss=None, seq_loss=None))  # no loss column at all
    assert older["parity_on"] == "accuracy" and pd.isna(older["loss_mean"])


def test_the_precisions_band_widens_seqs_spread():
    # 0.76 is 0.02 under seq's min 0.78: outside for fp32 (no widening), within for bf16
    # (0.05); a loss 0.5 % over seq's max is within bf16's 1 %, 2 % over is not
    assert _cell(_runs(0.86, unified_acc=0.76))["parity_failed"] == "accuracy"
    assert _cell(_runs(0.86, unified_acc=0.76, precision="bf16"))["parity"] == \
        "within seq spread"
    assert _cell(_runs(0.87 * 1.005, precision="bf16"))["parity"] == "within seq spread"
    assert _cell(_runs(0.87 * 1.02, precision="bf16"))["parity_failed"] == "loss"
    assert _cell(_runs(0.87 * 1.005))["parity_failed"] == "loss"  # fp32: none


def test_report_json_names_what_failed(tmp_path, capsys):
    from tests.unit.fugue_tui.report.test_report_json_advice import _doc

    groups, jobs = _frames(unified_loss=1.88)
    pd.DataFrame(groups).to_csv(tmp_path / "master_groups.csv", index=False)
    pd.DataFrame(jobs).to_csv(tmp_path / "master_individual.csv", index=False)
    doc = _doc(capsys, tmp_path)  # validated against the report schema
    (cell,) = [c for c in doc["cells"] if c["executor"] == "unified_model"]
    assert cell["parity"] == "outside seq spread" and cell["parity_failed"] == "loss"
    assert json.dumps(cell["loss_mean"]) == "1.88"


def test_fidelity_precision_table_is_the_band_data():
    """docs/fidelity.md's "Precision" table states the bands this module applies: the
    "final train loss" and "val accuracy" columns of each precision's row."""
    text = FIDELITY.read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        if line.startswith("| fp32, tf32") or re.match(r"^\| (amp-fp16|amp-bf16|bf16) \|", line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = (cells[-2], cells[-1])  # final train loss, val accuracy
    assert rows[next(k for k in rows if k.startswith("fp32"))][1] == "equal"
    assert band("fp32") == band("tf32") == EXACT == PRECISION_BANDS["fp32"]
    for precision in ("amp-fp16", "amp-bf16", "bf16"):
        loss, acc = rows[precision]
        assert band(precision) == HALF
        assert loss == f"within {HALF.loss:.0%}".replace("%", " %")
        assert acc == f"within {HALF.accuracy:g}"
