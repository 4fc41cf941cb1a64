"""Garbage lines in a results CSV (issue 43): ``x,y,z``, NUL or 0xff bytes appended by hand
while rows are being written. The next rewrite of the file (a torn last line removed, a
header upgraded) moves them to a ``.malformed-`` side file and says so in one line naming
that file and the count; it used to pad them to full width, phantom rows that every reader
then skipped without a word. Real files; the append goes through a real subprocess (the
writer a runner would be) while the garbage is already there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.results.columns import GROUP_COLUMNS, GROUPS_FILE
from engine.results.read import read_rows_checked
from engine.results.store import append_rows

REPO = Path(__file__).resolve().parents[4]
GARBAGE = b"x,y,z\n\x00\x00\x00\n\xff\xfe\xff\n"


def _row(n: int) -> dict:
    return {"group_id": f"seq_{n}", "exp_id": "D_ens", "executor": "seq", "T_group": 1.5,
            "status": "ok"}


def _append_in_subprocess(path: Path, n: int) -> list[str]:
    code = ("import json, sys; from engine.results.store import append_rows; "
            "from engine.results.columns import GROUP_COLUMNS; "
            f"print(json.dumps(append_rows(sys.argv[1], [{_row(n)!r}], GROUP_COLUMNS)))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    import json

    return json.loads(proc.stdout)


@pytest.mark.parametrize("trigger", ["torn", "upgrade"])
def test_a_rewrite_moves_garbage_lines_to_a_side_file_and_says_so(tmp_path, trigger):
    path = tmp_path / GROUPS_FILE
    columns = GROUP_COLUMNS if trigger == "torn" else GROUP_COLUMNS[:-1]  # an older header
    append_rows(path, [_row(1)], columns)
    with open(path, "ab") as f:  # by hand, between two of the writer's rows
        f.write(GARBAGE)
    append_rows(path, [_row(2)], columns)
    if trigger == "torn":
        with open(path, "ab") as f:
            f.write(b"seq_3,D_ens,se")  # a writer killed mid-row
    told = _append_in_subprocess(path, 4)

    (side,) = tmp_path.glob(f"{GROUPS_FILE}.malformed-*")
    moved = [line for line in told if "malformed" in line]
    assert len(moved) == 1 and "3 malformed lines" in moved[0] and str(side) in moved[0]
    assert side.read_bytes().replace(b"\r\n", b"\n") == GARBAGE  # byte for byte
    rows, torn, damaged = read_rows_checked(path)
    assert [r["group_id"] for r in rows] == ["seq_1", "seq_2", "seq_4"]
    assert not torn and damaged == []  # no phantom row, nothing left to skip
    assert b"\x00" not in path.read_bytes() and b"x,y,z" not in path.read_bytes()
    assert len(list(tmp_path.glob(f"{GROUPS_FILE}.bak-*"))) == 1  # the file as it was, kept
