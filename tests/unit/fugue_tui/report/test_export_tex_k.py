"""``results.tex`` (``report --export``) gets a ``$K$`` column when the rows form a K sweep
(issue 23), and keeps its old layout otherwise. Nothing trains here."""

from __future__ import annotations

from fugue_tui.report.export import latex_table
from fugue_tui.report.figures import build
from tests.unit.engine.results.test_knee import _sweep


def _rows(tex: str) -> list[list[str]]:
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule")[0]
    return [[c.strip() for c in line.rstrip(" \\").split("&")]
            for line in body.strip().splitlines() if "&" in line]


def test_a_k_sweep_has_a_k_column(tmp_path):
    runs = _sweep(tmp_path, seq={1: 100, 2: 101, 4: 100}, unified_model={1: 100, 2: 190,
                                                                         4: 350})
    tex = latex_table(build(runs, n_boot=50))
    assert r"Experiment & Executor & $K$ & Variant" in tex
    assert r"\begin{tabular}{lllrrrlrrrll" + "r}" not in tex  # one column more, aligned
    assert r"\begin{tabular}{llrlrrrlrrrll}" in tex
    rows = _rows(tex)
    assert len(rows) == 6 and all(len(r) == 13 for r in rows)
    uni = {r[2]: r for r in rows if r[1] == r"unified\_model"}
    assert set(uni) == {"1", "2", "4"}
    assert uni["4"][6] == "3.500"  # speedup at K = 4 against seq at K = 4 (350 / 100)


def test_no_sweep_no_k_column(tmp_path):
    runs = _sweep(tmp_path, seq={5: 100}, unified_model={5: 300})
    tex = latex_table(build(runs, n_boot=50))
    assert "$K$" not in tex and r"\begin{tabular}{lllrrrlrrrll}" in tex
    # (the last column, the parity contract, issue 42)
    assert all(len(r) == 12 for r in _rows(tex))
