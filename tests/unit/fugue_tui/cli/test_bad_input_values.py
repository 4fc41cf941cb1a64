"""Bad values, refused while the campaign loads (issue 18, "unbounded inputs" and "values
checked only at run time"): rows of the bad-input contract of
:mod:`tests.unit.fugue_tui.cli.test_bad_input_matrix` (one line naming the file, experiment and key, exit
2, nothing written), run through that module's own test body.

Each row was accepted before the bounds of ``engine/bounds.py`` and the load-time name check
of a user's experiments file: a count that blew up the planner or the cell, a non-finite or
negative hyperparameter that failed after training started, an unknown name that became a
``skipped`` row at run time. Rows that need no process of their own (the rest of the table)
are in ``tests/unit/engine/test_value_bounds.py``.
"""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli.test_bad_input_matrix import Case, _batch, _with_exps
from tests.unit.fugue_tui.cli.test_bad_input_matrix import (
    test_bad_input_exits_2_with_one_line_and_writes_nothing as _the_contract,
)

#: A user's own experiment U (mlp on wine), each key's TOML text replaceable.
_U = {"type": '"ensemble"', "model": '"mlp"', "dataset": '"wine"', "k": "2",
      "batch_size": "8", "epochs": "1", "lr": "0.01"}


def _user(change: dict[str, str], *needles: str, id: str) -> Case:
    """Experiment U of a user's file ``mine.toml`` with ``change`` applied; the error must
    name the file, the experiment and ``needles``."""
    body = "".join(f"{key} = {value}\n" for key, value in {**_U, **change}.items())
    return _with_exps("[experiments.U]\n" + body, "experiments.U", *needles,
                      campaign='experiments = "U"\n', id=id)


CASES = [
    # ------------------------------------------------------------------ unbounded counts
    _user({"k": "10000000"}, "key 'k'", "<= 4096", "10000000", id="k-ten-million"),
    _user({"epochs": "1000000000000"}, "key 'epochs'", "<= 100000", "1000000000000",
          id="epochs-10-to-the-12"),
    _batch('experiments = "D_ens"\nthreads = 100000\n', "key 'threads'", "<= 1024",
           "100000", id="threads-100000"),
    Case("flag-threads-100000", {}, ("run", "--exp", "D_ens", "--threads", "100000",
                                     "--dry-run"), ("--threads", "<= 1024", "100000")),
    _batch('experiments = "all"\nexecutors = ["seq", "mp", "ray", "unified_model"]\n'
           'compile = "both"\npasses = 1000\n', "cells", "at most 10000",
           id="campaign-of-a-million-cells"),
    # ------------------------------------------------------------------ values
    _user({"lr": "inf"}, "key 'lr'", "finite", "inf", id="lr-inf"),
    _with_exps('[experiments.D_ens]\noptimizer_kwargs = { momentum = -1 }\n', "D_ens",
               "'momentum'", ">= 0", "-1", id="momentum-negative"),
    _with_exps('[experiments.D_ens]\noptimizer_kwargs = { momentum = 0.9, '
               'weight_decay = -0.5 }\n', "D_ens", "'weight_decay'", ">= 0", "-0.5",
               id="weight-decay-negative"),
    _with_exps('[experiments.D_ens]\nmodel_kwargs = { hidden = -5 }\n', "D_ens",
               "model 'mlp_bn'", "'hidden'", ">= 1", "-5", id="model-kwargs-hidden-negative"),
    # ------------------------------------------------------------------ names in a user's file
    _user({"model": '"mlpp"'}, "key 'model'", "unknown model 'mlpp'", "did you mean 'mlp'",
          id="user-unknown-model"),
    _user({"dataset": '"wien"'}, "key 'dataset'", "unknown dataset 'wien'",
          "did you mean 'wine'", id="user-unknown-dataset"),
    _user({"task": '"clasification"'}, "key 'task'", "unknown task 'clasification'",
          "did you mean 'classification'", id="user-unknown-task"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_value_exits_2_with_one_line_and_writes_nothing(tmp_path, case: Case):
    _the_contract(tmp_path, case)
