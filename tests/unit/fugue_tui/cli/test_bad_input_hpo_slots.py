"""``sha`` with fewer slots than trials (issue 25) is refused when the plan is built — one
line naming the file, the executor and the numbers, exit 2, nothing written — instead of
a cell that fails after its workers or its Ray runtime started. Rows of the matrix in
tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check; the rule itself
(``engine.define.sha_slots``) is checked here without a process."""

from __future__ import annotations

import pytest

from engine.define.sha_slots import sha_slot_error
from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_EXPS = ('[experiments.S]\ntype = "hpo"\nmodel = "mlp"\ndataset = "wine"\nepochs = 2\n'
         'batch_size = 32\n'
         'search_space = { lr = { loguniform = [1e-3, 1e-1] } }\nnum_samples = 4\n')


def _slots(executor: str, max_parallel: int, id: str) -> matrix.Case:
    campaign = (f'experiments = "S"\nexecutors = ["{executor}"]\n'
                f'[options.{executor}]\nscheduler = "sha"\nmax_parallel = {max_parallel}\n')
    return matrix.Case(id, {"c.toml": 'experiments_file = "mine.toml"\n' + campaign,
                            "mine.toml": _EXPS}, ("--batch", "c.toml"),
                       ("c.toml", "experiment S", f"options.{executor}", "scheduler 'sha'",
                        "4 trials", f"max_parallel {max_parallel}", "max_parallel >= 4"))


CASES = [
    _slots("mp", 2, "hpo-sha-mp-too-few-slots"),
    _slots("unified_model", 3, "hpo-sha-unified-too-few-slots"),
    matrix.Case("cli-hpo-sha-ray-too-few-slots", {},
                ("run", "--type", "hpo", "--model", "mlp", "--dataset", "wine", "--epochs",
                 "2", "--search-space", "lr=loguniform:1e-3:1e-1", "--num-samples", "3",
                 "--exec", "ray", "--scheduler", "sha", "--max-parallel", "2"),
                ("options.ray", "scheduler 'sha'", "3 trials", "max_parallel 2")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sha_with_too_few_slots_is_refused_at_planning(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)


def test_the_rule():
    assert sha_slot_error("mp", "sha", 4, 4) is None  # enough slots
    assert sha_slot_error("mp", "sha", 4, None) is None  # None: every job at once
    assert sha_slot_error("seq", "sha", 4, 1) is None  # seq has no slots
    assert sha_slot_error("ray", "asha", 4, 1) is None  # asynchronous: never waits
    line = sha_slot_error("ray", "sha", 5, 2, "auto")
    assert "5 trials" in line and "max_parallel 2" in line and '"auto"' in line
    assert "auto" not in sha_slot_error("ray", "sha", 5, 2, "user")
