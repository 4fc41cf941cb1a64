"""Messages a fresh user met (finding 12), as rows of the bad-input contract of
:mod:`tests.unit.fugue_tui.cli.test_bad_input_matrix` (one line naming the file, key or value, exit 2,
nothing written), run through that module's own test body, plus ``validate``'s one line
per experiment:

- an experiment without ``type`` says "missing key 'type'" (it said "got None");
- every key, type and name problem of an experiments file in one line, not one per run;
- ``device = "cuda:9"`` in a campaign names the campaign file;
- ``simulate --ram-budget -1GiB`` reaches the value's own check (argparse said "expected
  one argument": the value looks like an option).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.unit.fugue_tui.cli.test_bad_input_matrix import Case, _batch, _with_exps
from tests.unit.fugue_tui.cli.test_bad_input_matrix import (
    test_bad_input_exits_2_with_one_line_and_writes_nothing as _the_contract,
)
from tests.unit.fugue_tui.test_json_outputs import fugue

_TWO_BAD = """[experiments.A1]
type = "ensemble"
model = "mlp"
dataset = "wnie"
k = 2
lr = 0.1

[experiments.A3]
type = "ensemble"
model = "mlp"
dataset = "wine"
k = 2
batch_size = 8
epochs = 1
lr = 0.1
lrr = 3
"""

CASES = [
    _with_exps('[experiments.U]\nmodel = "mlp"\ndataset = "wine"\nk = 2\nbatch_size = 8\n'
               'epochs = 1\nlr = 0.01\n', "experiments.U", "missing key 'type'",
               "one of ensemble, cv, hpo, multi_model", campaign='experiments = "U"\n',
               id="experiment-without-type"),
    _with_exps(_TWO_BAD, "3 problems", "experiments.A1: missing keys 'batch_size', 'epochs'",
               "experiments.A1: key 'dataset': unknown dataset 'wnie' (did you mean 'wine'?)",
               "experiments.A3: unknown key 'lrr' (did you mean 'lr'?)",
               campaign='experiments = "A3"\n', id="every-problem-of-a-file-at-once"),
    _batch('experiments = "D_ens"\nexecutors = ["seq"]\ndevice = "cuda:9"\n',
           "device 'cuda:9'", id="campaign-device-cuda9-names-the-file"),
    Case("simulate-negative-ram-budget", {}, ("simulate", "D_ens", "--ram-budget", "-1GiB"),
         ("argument --ram-budget", "must be > 0", "'-1GiB'")),
    Case("simulate-negative-cores", {}, ("simulate", "D_ens", "--cores", "-2"),
         ("argument --cores", ">= 1", "'-2'")),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_message_exits_2_with_one_line_and_writes_nothing(tmp_path, case: Case):
    _the_contract(tmp_path, case)


def test_no_experiment_type_is_not_got_none(tmp_path):
    (tmp_path / "mine.toml").write_text('[experiments.U]\nmodel = "mlp"\n')
    done = fugue("validate", "--experiments-file", str(tmp_path / "mine.toml"))
    assert done.returncode == 2 and "got None" not in done.stderr
    # both problems of U at once: the missing type, and the keys its type would need are
    # not guessed without a type
    assert done.stderr.count("\n") == 1 and "missing key 'type'" in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                    reason="without torchvision E01's reason is the missing module")
def test_validate_says_one_line_per_missing_dataset_and_the_hint_once(tmp_path):
    data = tmp_path / "data"
    done = fugue("validate", "E01", "E02", "D_ens", FUGUE_DATA_DIR=str(data))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    block = lines[:lines.index("")]
    assert block[0].startswith(f"experiments (data root {data}, FUGUE_DATA_DIR={data}")
    assert block[1:] == [
        "  E01    no: CIFAR-10 not found (fugue-tui prefetch E01)",
        "  E02    no: CIFAR-10 not found (fugue-tui prefetch E02)",
        "  D_ens  ok",
        "  missing data: prefetch fetches it into the data root above (details: --json)"]
    assert all(len(line) <= 80 for line in block[1:])
    assert done.stdout.count("FUGUE_DATA_DIR=") == 1 and not os.path.exists(data)
