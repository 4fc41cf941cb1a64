"""Bad input to ``profile``, ``simulate`` and ``max_parallel = "auto"`` (issue 24) ends like
every bad input (README, "Failures"): one line, exit 2, nothing written — rows of the
bad-input table (tests/unit/fugue_tui/cli/test_bad_input_matrix.py), checked by its own test on the real
CLI."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli.test_bad_input_matrix import Case, _batch
from tests.unit.fugue_tui.cli.test_bad_input_matrix import (
    test_bad_input_exits_2_with_one_line_and_writes_nothing as _check,
)

CASES = [
    Case("simulate-unknown-experiment", {}, ("simulate", "D_enz"),
         ("unknown experiment 'D_enz'", "D_ens")),
    Case("profile-unknown-experiment", {}, ("profile", "D_enz"),
         ("unknown experiment 'D_enz'", "D_ens")),
    Case("simulate-negative-ram", {}, ("simulate", "D_ens", "--ram-budget=-2GiB"),
         ("--ram-budget", "must be > 0", "-2GiB")),
    Case("simulate-unparsable-ram", {}, ("simulate", "D_ens", "--ram-budget", "lots"),
         ("--ram-budget", "not a size", "'lots'")),
    Case("simulate-zero-cores", {}, ("simulate", "D_ens", "--cores", "0"),
         ("--cores", "must be >= 1")),
    Case("simulate-unknown-executor", {}, ("simulate", "D_ens", "--executors", "unifed_model"),
         ("unknown executor 'unifed_model'", "unified_model")),
    Case("profile-bad-ks", {}, ("profile", "D_ens", "--ks", "1,4"),
         ("--ks", "at least two stacked sizes")),
    Case("run-auto-for-seq", {}, ("run", "--exp", "D_ens", "--exec", "seq",
                                  "--max-parallel", "auto"),
         ("--max-parallel auto", "seq", "one job at a time")),
    Case("run-max-parallel-word", {}, ("run", "--exp", "D_ens", "--exec", "mp",
                                       "--max-parallel", "many"),
         ("--max-parallel", "integer >= 1 or \"auto\"", "'many'")),
    _batch('experiments = "D_ens"\nexecutors = ["seq"]\n[options.seq]\nmax_parallel = "auto"\n',
           "options.seq", "key 'max_parallel'", "one job at a time", id="campaign-auto-for-seq"),
    _batch('experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmax_parallel = "auot"\n',
           "options.mp", "key 'max_parallel'", "'auot'", "did you mean 'auto'",
           id="campaign-max-parallel-typo"),
    _batch('experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmax_parallel = "auto"\n'
           '[budget]\nram = "-1GiB"\n', "budget", "key 'ram'", "must be > 0",
           id="campaign-negative-ram-budget"),
    _batch('experiments = "D_ens"\nexecutors = ["mp"]\n[budget]\nram = "six gigs"\n',
           "budget", "key 'ram'", "not a size", id="campaign-unparsable-ram-budget"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_profile_input(tmp_path, case: Case):
    _check(tmp_path, case)
