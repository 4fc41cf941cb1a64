"""``fugue-tui list`` shows each experiment's precision default (issue 26), not only the
legacy ``amp`` flag: its ``precision`` when set, ``amp (legacy)`` for ``amp = true``
without one (with a note saying what that runs), else ``fp32``; ``list --json`` carries
``precision`` (null where the experiment sets none)."""

from __future__ import annotations

import json

from rich.console import Console

from fugue_tui.commands.listing import LEGACY_AMP, print_catalogue


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}


def test_list_shows_each_experiments_precision_default(tmp_path, capsys):
    mine = tmp_path / "mine.toml"
    mine.write_text('[experiments.D_ens]\nprecision = "bf16"\n'
                    '[experiments.D_cv]\nprecision = "amp-bf16"\n')
    console = Console(width=160, record=True, color_system=None)
    assert print_catalogue(str(mine), console=console) == 0
    text = console.export_text()
    header = next(line for line in text.splitlines() if line.split()[:1] == ["id"])
    assert "precision" in header.split() and "amp" not in header.split()
    rows = _rows(text)
    assert "bf16" in rows["D_ens"] and "amp-bf16" in rows["D_cv"]
    assert "fp32" in rows["D_reg"]
    assert " ".join(rows["E01"]).count(LEGACY_AMP) == 1  # legacy amp = true, no precision
    assert any(line.startswith(f"{LEGACY_AMP}: the legacy amp flag")
               for line in text.splitlines())

    capsys.readouterr()  # the table above also went to stdout
    assert print_catalogue(str(mine), as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    by_id = {e["id"]: e for e in doc["experiments"]}
    assert by_id["D_ens"]["precision"] == "bf16" and by_id["D_cv"]["precision"] == "amp-bf16"
    assert by_id["E01"]["precision"] is None and by_id["E01"]["amp"] is True
    assert by_id["D_reg"]["precision"] is None and by_id["D_reg"]["amp"] is False


def test_narrow_list_keeps_its_columns(tmp_path):
    console = Console(width=80, record=True, color_system=None)
    assert print_catalogue(None, console=console) == 0
    text = console.export_text()
    assert "precision" not in text.splitlines()[1] and LEGACY_AMP not in text
