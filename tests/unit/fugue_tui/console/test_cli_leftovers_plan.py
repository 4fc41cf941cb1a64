"""The dry-run plan table (``fugue-tui --batch C --dry-run``, ``fugue-tui run --dry-run``) at
an 80-column terminal: one line per cell where the values allow it, nothing wider than 80
columns, skip reasons as numbered notes under the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from engine.define.campaign import load_campaign
from engine.runner.supervisor import Runner
from fugue_tui.console.dry_run import dry_run

REPO = Path(__file__).resolve().parents[4]
QUICK = REPO / "campaigns" / "quick.toml"

WIDE = """
name = "wide"
experiments = ["D_hpo", "E01"]
executors = ["seq", "ray", "unified_model"]
compile = "both"
compile_mode = "max-autotune-no-cudagraphs"
[options.ray]
scheduler = ["asha", "fifo"]
max_parallel = 3
[options.unified_model]
sweep = "ablation"
max_parallel = 3
"""


@pytest.fixture(autouse=True)
def _no_data(tmp_path, monkeypatch):
    """E01's CIFAR-10 is never here: its cells are skipped with a long reason."""
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))


def _plan(path: Path, width: int) -> tuple[Runner, list[str]]:
    runner = Runner(load_campaign(path))
    console = Console(width=width, record=True, color_system=None)
    assert dry_run(runner, console, str(path), shown=path.name) == 0
    return runner, console.export_text().splitlines()


def _cell_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"(│ )?\d+\s", line) and not re.search(r" cells? of ", line)]


def test_quick_plan_fits_80_columns_one_line_per_cell_with_full_keys():
    runner, lines = _plan(QUICK, 80)
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    cells = _cell_lines(lines)
    assert len(cells) == len(runner.cells) == 20, "\n".join(lines)
    for cell, line in zip(runner.cells, cells, strict=False):
        words = line.split()
        assert words[0] == str(cell.index) and cell.key in words, line
        assert cell.executor in words and words[-1] == "run", line


def test_a_plan_with_long_values_fits_80_columns_and_skip_reasons_are_notes(tmp_path):
    path = tmp_path / "wide.toml"
    path.write_text(WIDE)
    runner, lines = _plan(path, 80)
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80, text
    starts = _cell_lines(lines)
    assert [int(line.split()[0]) for line in starts] == [c.index for c in runner.cells]
    for cell, line in zip(runner.cells, starts, strict=False):
        key = next(w for w in line.split() if re.fullmatch(r"[0-9a-f]{8,16}", w))
        assert cell.key.startswith(key), line  # a prefix that control and resume accept
        assert sum(c.key.startswith(key) for c in runner.cells) == 1
        assert "unified_model" in line.split() or cell.executor != "unified_model", line
    e01 = [c.index for c in runner.cells if c.exp_id == "E01"]
    assert all(line.rstrip().endswith("skip [1]") for line in starts
               if int(line.split()[0]) in e01), text
    note = text[text.index("[1] skip cells "):]
    assert note.startswith(f"[1] skip cells {e01[0]}-{e01[-1]}: unavailable here: "), note


def test_a_wide_terminal_keeps_the_boxed_table():
    runner, lines = _plan(QUICK, 200)
    rows = [[p.strip() for p in line.split("│")[1:-1]] for line in lines if "│" in line]
    cells = [r for r in rows if r and r[0].isdigit()]
    assert [r[-2] for r in cells] == [c.key for c in runner.cells]
    assert {r[-1] for r in cells} == {"run"}


def test_the_plan_foretells_the_one_member_buckets_that_will_run_eager(tmp_path):
    """Issue 45: the dry run said nothing of buckets that cannot stack. The quick campaign's
    D_mm (four different models) gives unified_model four one-member buckets; its D_ens
    (five members of one model) stacks and gets no note; cutting D_ens into chunks of one
    (max_parallel = 1) leaves only one-member buckets."""
    _, lines = _plan(QUICK, 200)
    notes = [line for line in lines if line.startswith("note: unified_model")]
    d_mm = next(c.index for c in Runner(load_campaign(QUICK)).cells
                if c.exp_id == "D_mm" and c.executor == "unified_model")
    assert notes == [f"note: unified_model cell {d_mm}: 4 of 4 buckets will run eager (one "
                     f"member, nothing to stack; eager_buckets 4/4)"], "\n".join(lines)
    chunked = tmp_path / "c.toml"
    chunked.write_text('experiments = "D_ens"\nexecutors = ["unified_model"]\n'
                       '[options.unified_model]\nmax_parallel = 1\n')
    _, lines = _plan(chunked, 200)
    assert any("cell 1: 5 of 5 buckets will run eager" in line for line in lines), lines


def test_the_json_plan_says_the_forecast_on_stderr(capsys):
    """--dry-run --json: stdout holds the plan document alone, the note goes to stderr
    (docs/json.md: warnings and notes go to stderr); it was not said at all."""
    import json

    runner = Runner(load_campaign(QUICK))
    console = Console(width=200, record=True, color_system=None)
    assert dry_run(runner, console, str(QUICK), shown=QUICK.name, as_json=True) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["cells"]
    assert "note: unified_model cell" in err and "4 of 4 buckets will run eager" in err, err
