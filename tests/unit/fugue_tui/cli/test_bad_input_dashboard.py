"""Bad replay speeds (issue 30) end like every bad input: one line naming the flag and the
value with the accepted range, exit 2, nothing written — rows of the matrix in
tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check (argument parsing refuses them
before the dashboard asks for a terminal)."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

CASES = [
    matrix.Case(f"dashboard-speed-{name}", {"runs/x": matrix.DIR},
                ("dashboard", "--replay", "runs/x", "--speed", value),
                ("--speed", "replay speed must be a number from 0.1 to 1000", repr(value)))
    for name, value in (("zero", "0"), ("negative", "-5"), ("nan", "nan"), ("word", "fast"),
                        ("too-fast", "5000"))
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_replay_speed(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
