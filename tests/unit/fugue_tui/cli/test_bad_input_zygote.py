"""The bad-input contract (tests/unit/fugue_tui/cli/test_bad_input_matrix.py) for the choice of how cells
start: ``FUGUE_CELL_START`` other than ``zygote`` or ``spawn`` is one line naming the
variable, the value and the choices, exit 2, nothing written (a real run and a dry run)."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix
from tests.unit.fugue_tui.cli.test_bad_input_matrix import Case, _case_id

_TINY = ('[experiments.T]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "wine"\nk = 1\n'
         'batch_size = 8\nepochs = 1\nlr = 0.01\n')
_FILES = {"c.toml": 'experiments = "T"\nexperiments_file = "mine.toml"\n', "mine.toml": _TINY}
_NEEDLES = ("FUGUE_CELL_START", "'forkserver'", "zygote or spawn")

CASES = [
    Case("cell-start-unknown-real-run", _FILES, ("--batch", "c.toml"), _NEEDLES,
         {"FUGUE_CELL_START": "forkserver"}),
    Case("cell-start-unknown-dry-run", _FILES, ("--batch", "c.toml", "--dry-run"), _NEEDLES,
         {"FUGUE_CELL_START": "forkserver"}),
]


def test_ids_are_new():
    ids = [_case_id(c) for c in CASES]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {_case_id(c) for c in matrix.CASES}


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_cell_start_exits_2_with_one_line_and_writes_nothing(tmp_path, case: Case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
