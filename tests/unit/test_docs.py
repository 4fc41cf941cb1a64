"""The documentation names every column we write and every catalogue experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.define.catalogue import load_catalogue
from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.columns_doc import DOCS_FILE, with_doc_tables
from engine.results.columns_doc import main as columns_doc

ROOT = Path(__file__).resolve().parents[2]


def test_every_column_is_documented():
    text = (ROOT / "docs" / "results.md").read_text()
    missing = [c for c in dict.fromkeys(GROUP_COLUMNS + INDIVIDUAL_COLUMNS) if f"| `{c}` |" not in text]
    assert missing == []


def test_the_columns_tables_are_generated_from_the_registry():
    """docs/results.md's tables are exactly what ``python -m engine.results.columns_doc``
    writes from engine/results/columns.py (run it after adding a column)."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert DOCS_FILE == ROOT / "docs" / "results.md"
    assert with_doc_tables(text) == text
    assert columns_doc(["--check"]) == 0
    stale = with_doc_tables(text).replace("| `T_group` | group makespan", "| `T_group` | ...")
    assert with_doc_tables(stale) == text  # the generated part is rewritten whole


def test_readme_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    head = "\n".join(lines[:15])
    assert "scripts/ensure-env && .venv/bin/fugue-tui --batch campaigns/quick.toml" in head
    assert "scripts/ensure-env && scripts/test" in head
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/ensure-env" in ci and "exec scripts/test" in ci
    # the script runs every test once: the not-serial ones in parallel, then the serial ones
    script = (ROOT / "scripts" / "test").read_text()
    assert '-m "not serial"' in script and "-m serial" in script and "-n " in script


def test_quick_campaign_runs_the_whole_offline_family():
    catalogue = load_catalogue()
    offline = [e.id for e in catalogue.experiments.values() if e.family == "offline"]
    quick = (ROOT / "campaigns" / "quick.toml").read_text()
    assert all(exp_id in quick for exp_id in offline)
    assert {"ensemble", "cv", "hpo", "multi_model"} <= {catalogue.get(e).type for e in offline}


def test_every_generated_part_is_replaced_checked_and_refused_alike(tmp_path, capsys):
    """engine.generated_docs: the one implementation behind the four generated tables."""
    from engine.generated_docs import docs_command, replace_part

    text = "intro\n<!-- b -->\nold\n<!-- e -->\nend\n"
    assert replace_part(text, "<!-- b -->", "<!-- e -->", "new\n", where="t") == \
        "intro\n<!-- b -->\nnew\n<!-- e -->\nend\n"
    with pytest.raises(ValueError, match="t: the markers"):
        replace_part("no markers", "<!-- b -->", "<!-- e -->", "x", where="t")
    doc = tmp_path / "doc.md"
    doc.write_text(text)

    def rewrite(t):
        return replace_part(t, "<!-- b -->", "<!-- e -->", "new\n", where="t")

    assert docs_command(["--bogus"], doc, rewrite, "python -m gen", "the table") == 2
    assert "usage: python -m gen [--check]" in capsys.readouterr().err
    assert docs_command(["--check"], doc, rewrite, "python -m gen", "the table") == 1
    assert "the table is out of date; run python -m gen" in capsys.readouterr().err
    assert doc.read_text() == text  # a check writes nothing
    assert docs_command([], doc, rewrite, "python -m gen", "the table") == 0
    assert docs_command(["--check"], doc, rewrite, "python -m gen", "the table") == 0
    assert "new" in doc.read_text()
