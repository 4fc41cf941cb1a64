"""Issue 46: ``cores_used`` (the CPU cores a cell's processes used over its window) is
printed beside each speedup — the report's tables, ``--advise``, the report's JSON and the
dashboard's "speedup so far" strip — and a cell whose rows did not record it shows it
missing, never 0."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console

from engine.results.advise import advise
from engine.results.columns import GROUP_COLUMNS
from engine.results.load import load_runs
from engine.results.store import append_rows
from fugue_tui.app.models.so_far import speedup_parts
from fugue_tui.jsonout import report_cells
from fugue_tui.report.cell_tables import cell_values
from fugue_tui.report.tables import print_report


def _write(tmp_path: Path) -> None:
    def row(n, exp, executor, t_group, cores):
        return {"group_id": f"{executor}_{n:08x}", "exp_id": exp, "executor": executor,
                "pass": 1, "K": 2, "T_group": t_group, "status": "ok", "campaign_id": "a",
                "cell_key": f"k{n}", "compile_mode": "off", "host": "box",
                "torch_version": "2.5.1", "energy_method": "none", "cores_used": cores}
    append_rows(tmp_path / "master_groups.csv",
                [row(1, "E01", "seq", 4.0, 0.97), row(2, "E01", "mp", 2.0, 1.87),
                 row(3, "E02", "seq", 4.0, ""), row(4, "E02", "mp", 1.0, "")],
                GROUP_COLUMNS)


def test_the_report_prints_cores_used_beside_each_speedup(tmp_path):
    _write(tmp_path)
    console = Console(width=300, record=True, color_system=None)
    print_report(tmp_path, console, chart=False)
    lines = console.export_text().splitlines()
    header = next(s for s in lines if "speedup" in s and "exp" in s)
    titles = [c.strip() for c in header.split("┃")]
    assert titles[titles.index("speedup") + 1] == "used"  # "cores" over "used", beside it
    cells = {(s.split("│")[1].strip(), s.split("│")[2].strip()): [c.strip() for c in s.split("│")]
             for s in lines if s.count("│") > 5 and ("E01" in s or "E02" in s)}
    mp = cells[("E01", "mp")]
    at = mp.index("2.000")  # the speedup, then its cores
    assert mp[at + 1] == "1.87"
    assert cells[("E01", "seq")][at + 1] == "0.97"
    # not recorded (older rows): missing, never 0
    assert cells[("E02", "mp")][at] == "4.000" and cells[("E02", "mp")][at + 1] == "—"
    assert cell_values({"exp_id": "x", "executor": "mp", "compile_mode": "off",
                        "n_strategy": 1, "cores_used_mean": float("nan")})["cores"] == "—"


def test_advise_json_and_dashboard_carry_it(tmp_path):
    _write(tmp_path)
    runs = load_runs(tmp_path)
    advice = {a.exp_id: a for a in advise(runs, n_boot=0)}
    speed, = [s for s in advice["E01"].lines() if s.startswith("  speedup over seq")]
    assert "2.00×" in speed and speed.endswith("; 1.87 CPU cores used (cores_used)")
    assert not [s for s in advice["E02"].lines() if "cores" in s]  # nothing invented
    assert math.isnan(advice["E02"].recommended.cores_used)
    cells = {(c["exp_id"], c["executor"]): c for c in report_cells(runs)}
    assert cells[("E01", "mp")]["cores_used_mean"] == 1.87
    assert math.isnan(cells[("E02", "mp")]["cores_used_mean"])  # null in the JSON document
    parts = {label: value for label, value, _ in speedup_parts(tmp_path, "a", n_boot=0)}
    assert parts["E01 mp"] == "2.00× on 1.87 cores" and parts["E02 mp"] == "4.00×"
