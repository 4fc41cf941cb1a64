"""``fugue-tui report`` shows where two executors' scheduler decisions first differ for
the same hpo cell (issue 46), from the decisions.json each group row names: the first
(trial, rung) decided otherwise, or — same decisions — the first arrival that differs;
in the text and in ``--json`` (valid against its schema). Fixture files with known
answers (tests/fixtures/decisions); nothing trains here."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from rich.console import Console

from engine.results import decision_diff, decisions
from fugue_tui.report.tables import print_report, run_report
from tests.unit.engine.results.test_analysis import group, write
from tests.unit.fugue_tui.test_json_outputs import strict

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "decisions"


def _runs(tmp_path: Path, broken: bool = False) -> Path:
    rows = []
    for n, executor in enumerate(("seq", "ray", "unified_model"), 1):
        rel = Path("c1") / "cells" / f"00{n}-H-{executor}-asha-p1-0000000{n}" / "attempt-1"
        (tmp_path / rel).mkdir(parents=True)
        target = tmp_path / rel / decisions.FILE
        if broken and executor == "ray":
            target.write_text('{"schema": 1, "decisions": [')  # torn
        else:
            shutil.copy(FIXTURES / f"{executor}.json", target)
        rows.append(group("H", executor, 2.0, k=3, scheduler="asha", mode="hpo",
                          decisions=str(rel / decisions.FILE)))
    rows.append(group("H", "ray", 2.0, k=3, scheduler="fifo", mode="hpo"))  # decided nothing
    return write(tmp_path, rows)


RAY = ("H asha pass 1: ray vs seq: first differ at trial H_t1 rung 1: seq stop (val_loss "
       "1.2, arrival 3), ray continue (val_loss 1.2, arrival 1)")
UNIFIED = ("H asha pass 1: unified_model vs seq: same decisions, arrival order first "
           "differs at decision 2: seq trial H_t0 rung 2, unified_model trial H_t1 rung 1")


def test_report_names_the_first_difference(tmp_path):
    out = io.StringIO()
    print_report(_runs(tmp_path), Console(file=out, width=400, color_system=None),
                 chart=False)
    text = out.getvalue()
    assert f"  {RAY}\n" in text and f"  {UNIFIED}\n" in text
    assert text.count(" vs seq: ") == 2  # the fifo row named no file: not compared


def test_report_json_carries_the_differences(tmp_path, capsys):
    run_report(_runs(tmp_path), as_json=True)
    doc = strict(capsys.readouterr().out, "report")
    by = {e["b"]["executor"]: e for e in doc["decisions"]}
    assert set(by) == {"ray", "unified_model"}
    assert by["ray"]["difference"] == {"kind": "decision", "trial": "H_t1", "rung": 1,
                                       "position": None,
                                       "a": "stop (val_loss 1.2, arrival 3)",
                                       "b": "continue (val_loss 1.2, arrival 1)"}
    assert by["ray"]["text"] == RAY and by["unified_model"]["text"] == UNIFIED
    assert by["unified_model"]["difference"]["kind"] == "arrival"
    assert by["unified_model"]["difference"]["position"] == 2
    assert by["ray"]["a"]["decisions"].endswith("seq-asha-p1-00000001/attempt-1/decisions.json")


def test_same_files_agree_and_a_torn_file_is_named(tmp_path):
    seq = decisions.read(FIXTURES / "seq.json")
    assert decisions.first_difference(seq, seq) is None
    entries = decision_diff.compare(
        [{"exp_id": "H", "executor": "seq", "scheduler": "asha", "pass": 1,
          "decisions": "seq.json"},
         {"exp_id": "H", "executor": "mp", "scheduler": "asha", "pass": 1,
          "decisions": "seq.json"}], FIXTURES)
    assert [(e["b"]["executor"], e["difference"], e["text"]) for e in entries] == [
        ("mp", None, "H asha pass 1: mp vs seq: same decisions in the same arrival order "
                     "(5 decisions)")]
    runs = _runs(tmp_path, broken=True)
    out = io.StringIO()
    print_report(runs, Console(file=out, width=400, color_system=None), chart=False)
    line = next(x for x in out.getvalue().splitlines() if "ray vs seq" in x)
    assert "not compared:" in line and "decisions.json: unreadable decisions file" in line


def _two_campaigns(tmp_path: Path) -> Path:
    """seq and unified_model in campaign c1, ray alone in a second campaign c2 (another
    campaign_hash): the user's `run --exec seq unified_model` then `run --exec ray`."""
    rows = []
    for n, (executor, campaign) in enumerate((("seq", "c1"), ("unified_model", "c1"),
                                              ("ray", "c2")), 1):
        rel = Path(campaign) / "cells" / f"00{n}-H-{executor}-asha-p1-0000000{n}" / "attempt-1"
        (tmp_path / rel).mkdir(parents=True)
        shutil.copy(FIXTURES / f"{executor}.json", tmp_path / rel / decisions.FILE)
        rows.append(group("H", executor, 2.0, k=3, scheduler="asha", mode="hpo",
                          campaign=campaign, campaign_hash=f"h{campaign[-1]}",
                          decisions=str(rel / decisions.FILE)))
    return write(tmp_path, rows)


def test_campaigns_pair_as_time_to_best_pairs_them(tmp_path, capsys):
    # time to best pools seq across campaigns (same machine, stack, workload, scheduler):
    # so do the decisions; --by-campaign pairs within a campaign only, and says so
    runs = _two_campaigns(tmp_path)
    out = io.StringIO()
    print_report(runs, Console(file=out, width=400, color_system=None), chart=False)
    text = out.getvalue()
    assert f"  {RAY.replace('ray vs seq', 'ray vs seq of campaign c1')}\n" in text
    assert f"  {UNIFIED}\n" in text
    out = io.StringIO()
    print_report(runs, Console(file=out, width=400, color_system=None), chart=False,
                 by_campaign=True)
    alone = [s for s in out.getvalue().splitlines() if s.startswith("  H asha pass 1: ray")]
    assert alone == ["  H asha pass 1: ray: no seq decisions to compare with (none of the "
                     "same campaign, machine and stack, workload, K, precision, compile "
                     "mode and scheduler at pass 1; time to best pairs cells the same way)"]
    run_report(runs, as_json=True, by_campaign=True)
    by = {e["b"]["executor"]: e for e in strict(capsys.readouterr().out, "report")["decisions"]}
    assert by["ray"]["a"] == {"executor": "seq", "decisions": None}
    assert (by["ray"]["difference"], by["ray"]["error"], by["ray"]["baseline_campaign_id"],
            by["ray"]["campaign_id"]) == (None, None, None, "c2")
    assert by["ray"]["text"] == alone[0].strip()
    run_report(runs, as_json=True)
    by = {e["b"]["executor"]: e for e in strict(capsys.readouterr().out, "report")["decisions"]}
    assert by["ray"]["baseline_campaign_id"] == "c1" and by["ray"]["difference"]["trial"] == "H_t1"
    assert by["unified_model"]["baseline_campaign_id"] == "c1"


def test_own_campaigns_seq_first_then_the_latest():
    def row(executor, campaign, time_utc, machine="A"):
        return {"exp_id": "H", "executor": executor, "scheduler": "asha", "pass": 1,
                "campaign_id": campaign, "machine": machine, "time_utc": time_utc,
                "decisions": f"{executor}.json"}

    def bases(rows):
        return [(e["campaign_id"], e["baseline_campaign_id"])
                for e in decision_diff.compare(rows, FIXTURES)]

    seqs = [row("seq", "c1", "2026-01-02"), row("seq", "c2", "2026-01-01")]
    assert bases([*seqs, row("ray", "c2", "2026-01-03")]) == [("c2", "c2")]
    assert bases([*seqs, row("ray", "c3", "2026-01-03")]) == [("c3", "c1")]
    assert bases([*seqs, row("ray", "c3", "2026-01-03", machine="B")]) == [("c3", None)]
