"""Issue 45: a unified_model row whose buckets trained eagerly (``eager_buckets`` n > 0)
gets one note in the report (the `--batch` summary is the report) and in the dashboard's
results header; rows without the column (older rows, other executors) and ``0/m`` say
nothing."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from engine.results.columns import GROUP_COLUMNS
from engine.results.eager_note import eager_count, eager_notes
from engine.results.load import load_runs
from engine.results.store import append_rows
from fugue_tui.app.models.results import header_text
from fugue_tui.report.tables import print_report


def _write(tmp_path: Path, eager: list[str]) -> None:
    def row(n, executor, value=""):
        return {"group_id": f"{executor}_{n:08x}", "exp_id": "E05", "executor": executor,
                "pass": 1, "K": 3, "T_group": 4.0 if executor == "seq" else 2.0, "status": "ok",
                "campaign_id": "a", "cell_key": f"k{n}", "compile_mode": "off", "host": "box",
                "torch_version": "2.5.1", "energy_method": "none", "eager_buckets": value,
                "features": "vf:0,s:0,fl:0" if eager_count(value) else "vf:1,s:0,fl:0"}
    append_rows(tmp_path / "master_groups.csv",
                [row(0, "seq")] + [row(10 + i, "unified_model", v) for i, v in enumerate(eager)],
                GROUP_COLUMNS)


def test_the_report_and_the_dashboard_name_rows_that_trained_eagerly(tmp_path):
    _write(tmp_path, ["1/1: structure: member 1 differs", "0/1"])
    console = Console(width=300, record=True, color_system=None)
    print_report(tmp_path, console, chart=False)
    text = console.export_text()
    notes = [s for s in text.splitlines() if "trained bucket(s) eagerly" in s]
    assert len(notes) == 1, text
    assert "1 unified_model row(s)" in notes[0]
    assert "E05 unified_model pass 1 (1/1: structure: member 1 differs)" in notes[0]
    runs = load_runs(tmp_path)
    header = header_text(tmp_path, runs, runs, "", "").plain
    assert "note: 1 unified_model row(s) trained bucket(s) eagerly" in header


def test_no_note_when_every_bucket_ran_vectorised(tmp_path):
    _write(tmp_path, ["0/2", ""])
    console = Console(width=300, record=True, color_system=None)
    print_report(tmp_path, console, chart=False)
    assert "eagerly" not in console.export_text()
    assert eager_notes([{"eager_buckets": float("nan")}, {}]) == []
    # vf:0 asked for (ablation rung A): eager as requested, no note
    assert eager_notes([{"eager_buckets": "1/1: vf:0 (vectorised forward off)",
                         "features_requested": "vf:0,s:0,fl:0"}]) == []
    assert eager_notes([{"eager_buckets": "1/1: one member, nothing to stack",
                         "features_requested": "vf:1,s:1,fl:0"}])
