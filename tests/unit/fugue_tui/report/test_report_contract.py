"""The report says "bit for bit" only where the rows say ``exact`` (issue 42): a cell is
bit for bit when every one of its ok rows' ``parity_contract`` is ``exact``; one row with
a bound makes the cell "within" that bound; a cell whose rows recorded nothing shows "—".
The terminal table, the LaTeX export and the JSON report read the same pooled value."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console

from engine.results.columns import GROUP_COLUMNS
from engine.results.load import load_runs
from engine.results.parity_contract import PATTERN
from engine.results.store import append_rows
from fugue_tui.jsonout import report_cells
from fugue_tui.report.export import latex_table
from fugue_tui.report.figures import build
from fugue_tui.report.tables import print_report

REPO = Path(__file__).resolve().parents[4]
ROUNDING = "bound:rounding_bound(T,n)"


def _runs(tmp_path: Path):
    def row(n, executor, contract, features=""):
        return {"group_id": f"{executor}_{n:08x}", "exp_id": "E05", "executor": executor,
                "K": 4, "T_group": 4.0 if executor == "seq" else 2.0 + 0.01 * n,
                "status": "ok", "campaign_id": "a", "cell_key": f"k{n}",
                "compile_mode": "off", "host": "box", "torch_version": "2.5.1",
                "energy_method": "none", "features": features, "parity_contract": contract}
    rows = ([row(i, "seq", "exact") for i in range(2)]
            # a cell every row of which says exact
            + [row(10 + i, "unified_model", "exact", "vf:1,s:0,fl:0") for i in range(2)]
            # one row of the cell has only a bound: the cell is within it, not bit for bit
            + [row(20, "unified_model", "exact", "vf:0,s:0,fl:0"),
               row(21, "unified_model", ROUNDING, "vf:0,s:0,fl:0")]
            # rows written before the column: nothing claimed
            + [row(30 + i, "mp", "") for i in range(2)])
    append_rows(tmp_path / "master_groups.csv", rows, GROUP_COLUMNS)
    return load_runs(tmp_path)


def test_the_report_says_bit_for_bit_only_where_every_row_says_exact(tmp_path):
    runs = _runs(tmp_path)
    console = Console(width=400, record=True, color_system=None)
    print_report(tmp_path, console, chart=False)
    lines = console.export_text().splitlines()

    def line(executor, features=""):
        found = [s for s in lines if re.match(rf"│ E05 │ {executor}\s+│", s) and features in s]
        assert len(found) == 1, (executor, features, lines)
        return found[0]

    assert "bit for bit" in line("seq")
    assert "bit for bit" in line("unified_model", "vf:1,s:0,fl:0")
    mixed = line("unified_model", "vf:0,s:0,fl:0")
    assert "bit for bit" not in mixed and "within rounding_bound(T,n)" in mixed
    assert "bit for bit" not in line("mp") and "within" not in line("mp")
    assert any(s.startswith("parity contract: bit for bit = every row") for s in lines)

    tex = latex_table(build(runs, n_boot=0))
    body = [s for s in tex.splitlines() if s.startswith("E05")]
    assert [s.rsplit("&", 1)[1].strip(" \\") for s in body] == [
        "bit for bit", "bit for bit", r"within rounding\_bound(T,n)", "--"]

    cells = report_cells(runs)  # (document() writes a missing value, NaN, as null)
    assert [c["parity_contract"] if isinstance(c["parity_contract"], str) else None
            for c in cells] == ["exact", "exact", ROUNDING, None]


def test_the_json_schema_and_the_engine_share_the_grammar():
    schema = json.loads((REPO / "fugue_tui" / "schemas" / "report.v1.json").read_text())
    prop = schema["properties"]["cells"]["items"]["properties"]["parity_contract"]
    assert prop["anyOf"][0]["pattern"] == PATTERN.pattern
