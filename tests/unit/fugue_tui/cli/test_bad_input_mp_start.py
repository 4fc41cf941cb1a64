"""Bad values of mp's ``start`` (issue 20) end like every bad input: one line naming the
file, key and value (with the nearest valid one), exit 2, nothing written — rows of the
matrix in tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

CASES = [
    matrix._batch('experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nstart = "forksever"\n',
                  "options.mp", "'start'", "forkserver, spawn", "did you mean 'forkserver'",
                  id="mp-start-typo"),
    matrix._batch('experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\n'
                  'start = ["spawn", "fork"]\n', "options.mp", "'start'", "'fork'",
                  id="mp-start-list-bad-element"),
    matrix._batch('experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nstart = []\n',
                  "options.mp", "'start'", "empty list", id="mp-start-empty-list"),
    matrix.Case("cli-mp-start-unknown", {},
                ("run", "--exp", "D_ens", "--exec", "mp", "--option", "mp.start=fork"),
                ("mp", "'start'", "'fork'")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_mp_start(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
