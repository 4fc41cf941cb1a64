"""Bad hpo search spaces (issue 25) end like every bad input: one line naming the file and
the key (with the nearest valid name where there is one), exit 2, nothing written — rows
of the matrix in tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_HEAD = '[experiments.S]\ntype = "hpo"\nmodel = "mlp"\ndataset = "digits"\nepochs = 1\n'
_CAMPAIGN = 'experiments = "S"\n'


def _space(space: str, *needles: str, id: str, extra: str = "") -> matrix.Case:
    return matrix._with_exps(_HEAD + f"search_space = {{ {space} }}\n" + extra, *needles,
                             campaign=_CAMPAIGN, id=id)


_RUN = ("run", "--model", "mlp", "--dataset", "digits", "--epochs", "1", "--exec", "seq")

CASES = [
    _space('lr = { logunifrom = [1e-4, 1e-1] }', "search_space", "'lr'",
           "unknown distribution 'logunifrom'", "did you mean 'loguniform'",
           id="hpo-unknown-distribution"),
    _space('lr = { uniform = [0.1, 0.01] }', "search_space", "'lr': uniform bounds reversed",
           id="hpo-bounds-reversed"),
    _space('lr = { loguniform = [0, 0.1] }', "search_space", "'lr': loguniform needs a positive low bound",
           id="hpo-loguniform-nonpositive"),
    _space('lr = { loguniform = [1e-4, 1e-1] }', "'num_samples'", ">= 1", "got 0",
           extra="num_samples = 0\n", id="hpo-num-samples-0"),
    _space('"model_kwarg.hidden" = { randint = [8, 64] }', "search_space",
           "'model_kwarg.hidden' is not a job field", "model_kwargs", id="hpo-dotted-not-a-field"),
    _space('weight_decay = [0.0, 0.01], "optimizer_kwargs.weight_decay" = '
           '{ uniform = [0, 1e-3] }', "'optimizer_kwargs.weight_decay'", "'weight_decay'",
           "both gridded and sampled", id="hpo-axis-gridded-and-sampled"),
    matrix.Case("cli-hpo-unknown-distribution", {},
                (*_RUN, "--search-space", "lr=logunifrom:1e-4:1e-1"),
                ("--search-space", "'lr'", "did you mean 'loguniform'")),
    matrix.Case("cli-hpo-num-samples-without-hpo", {},
                (*_RUN, "--type", "ensemble", "--num-samples", "4"),
                ("--num-samples", "--type hpo")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_hpo_search_space(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
