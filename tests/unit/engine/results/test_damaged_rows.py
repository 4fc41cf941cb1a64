"""A results file damaged in the middle (a line cut short, an unclosed quote, an external
edit) must not be read into phantom rows or shifted columns, nor swallow the rows after it:
the damaged line is left out and named, the file unchanged (a user test of issue 18 found
``report`` silently showing a phantom machine, and an unclosed quote eating a real row)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.results.columns import GROUPS_FILE
from engine.results.load import load_runs
from engine.results.read import read_rows, read_rows_checked

HARNESS = Path(__file__).resolve().parents[3] / "fixtures" / "fugue-harness-cpu"


def _damage(tmp_path, bad: str) -> tuple[Path, list[str], bytes]:
    shutil.copytree(HARNESS, tmp_path / "runs")
    path = tmp_path / "runs" / GROUPS_FILE
    lines = path.read_text().splitlines(keepends=True)
    ids = [r["group_id"] for r in read_rows(path)]
    path.write_text(lines[0] + bad + "\n" + "".join(lines[1:]))
    return path, ids, path.read_bytes()


@pytest.mark.parametrize("bad, why", [
    ("seq_cut,D_ens,seq,2,0.5,1.0,ok,20250101_0000", "fields where the header has"),
    ('garbage,1,2,"unterminated', "(damaged)"),  # closed by a later row's quote
])
def test_a_damaged_line_is_left_out_and_named_and_no_row_is_lost(tmp_path, bad, why):
    path, ids, before = _damage(tmp_path, bad)
    rows, torn, notes = read_rows_checked(path)
    assert [r["group_id"] for r in rows] == ids and not torn
    assert len(notes) == 1 and notes[0].startswith(f"{path}: line 2 ") and why in notes[0]
    runs = load_runs(tmp_path / "runs")  # the frames the report and the dashboard use
    assert sorted(runs.groups["group_id"]) == sorted(ids)
    assert notes[0] in runs.notes
    assert path.read_bytes() == before  # reading changes nothing


def test_report_on_a_damaged_file_warns_and_shows_no_phantom_machine(tmp_path, capsys):
    from fugue_tui.cli import main

    path, _, _ = _damage(tmp_path, "seq_cut,D_ens,seq,2,0.5")
    assert main(["report", str(tmp_path / "runs"), "--width", "200"]) == 0
    captured = capsys.readouterr()
    expected = (f"fugue-tui: warning: {path}: line 2 has 5 fields where the header has "
                f"{len(read_rows_checked(path)[0][0])} (damaged): left out; the file is "
                f"unchanged")
    assert [line for line in captured.err.splitlines() if "line 2" in line] == [expected]
    assert "unknown machine" not in captured.out and "torch ?" not in captured.out


def test_an_unclosed_quote_running_to_the_end_gives_the_lines_after_it_back(tmp_path):
    path = tmp_path / GROUPS_FILE
    path.write_text('a,b,c\n1,2,3\ngarbage,1,"open\n4,5,6\n7,8,9\n')
    rows, torn, notes = read_rows_checked(path)
    assert [r["a"] for r in rows] == ["1", "4", "7"] and not torn
    expected = (f"{path}: line 3 opens a quote that is never closed (damaged): left out; "
                f"the file is unchanged")
    assert notes == [expected]
    path.write_text('a,b,c\n1,2,3\n4,5,"6')  # a write in progress: torn, not damaged
    assert read_rows_checked(path) == ([{"a": "1", "b": "2", "c": "3"}], True, [])
