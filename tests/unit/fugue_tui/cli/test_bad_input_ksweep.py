"""Bad K sweeps (issue 23) end like every bad input: one line naming the file (or the
flag), the key and the value, exit 2, nothing written — rows of the matrix in
tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_ENS = 'experiments = "D_ens"\nexecutors = ["seq"]\n'

CASES = [
    matrix._batch(_ENS + "k_sweep = [1, 4, 2]\n", "'k_sweep'", "increasing", "2 after 4",
                  id="k-sweep-not-increasing"),
    matrix._batch(_ENS + "k_sweep = [1, 2, 2, 4]\n", "'k_sweep'", "K = 2 twice",
                  id="k-sweep-duplicate"),
    matrix._batch(_ENS + "k_sweep = [0, 1, 2]\n", "'k_sweep'", ">= 1", "got 0",
                  id="k-sweep-below-one"),
    matrix._batch(_ENS + "k_sweep = [-4]\n", "'k_sweep'", "got -4", id="k-sweep-negative"),
    matrix._batch(_ENS + "k_sweep = []\n", "'k_sweep'", "non-empty", id="k-sweep-empty"),
    matrix._batch(_ENS + 'k_sweep = [1, "2"]\n', "'k_sweep'", "integers", "'2'",
                  id="k-sweep-string-element"),
    matrix._batch(_ENS + "k_sweep = 4\n", "'k_sweep'", id="k-sweep-not-a-list"),
    matrix._batch(_ENS + "k_sweep = [1, 8192]\n", "'k_sweep'", "8192", id="k-sweep-too-large"),
    matrix._batch('experiments = "D_ens,D_cv"\nk_sweep = [1, 2]\n', "'k_sweep'", "D_cv is cv",
                  "ensemble", id="k-sweep-on-cv"),
    matrix._batch('experiments = "D_hpo"\nk_sweep = [1, 2]\n', "'k_sweep'", "D_hpo is hpo",
                  id="k-sweep-on-hpo"),
    matrix._batch('experiments = "D_mm"\nk_sweep = [1, 2]\n', "'k_sweep'",
                  "D_mm is multi_model", id="k-sweep-on-multi-model"),
    matrix._batch(_ENS + "k_sweeep = [1, 2]\n", "k_sweeep", "k_sweep", id="k-sweep-typo"),
    matrix.Case("cli-k-sweep-not-increasing", {},
                ("run", "--exp", "D_ens", "--k-sweep", "4,2"),
                ("--k-sweep", "increasing", "2 after 4")),
    matrix.Case("cli-k-sweep-duplicate", {}, ("run", "--exp", "D_ens", "--k-sweep", "1,1"),
                ("--k-sweep", "K = 1 twice")),
    matrix.Case("cli-k-sweep-zero", {}, ("run", "--exp", "D_ens", "--k-sweep", "0,1"),
                ("--k-sweep", "got 0")),
    matrix.Case("cli-k-sweep-not-numbers", {}, ("run", "--exp", "D_ens", "--k-sweep", "1,two"),
                ("--k-sweep", "'1,two'")),
    matrix.Case("report-knee-fraction-above-one", {}, ("report", "--knee-fraction", "1.5"),
                ("--knee-fraction 1.5", "between 0 and 1")),
    matrix.Case("report-knee-fraction-not-a-number", {}, ("report", "--knee-fraction", "ten"),
                ("--knee-fraction ten",)),
    matrix.Case("cli-k-sweep-on-cv", {}, ("run", "--exp", "D_cv", "--k-sweep", "1,2"),
                ("--k-sweep", "D_cv is cv")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_k_sweep(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
