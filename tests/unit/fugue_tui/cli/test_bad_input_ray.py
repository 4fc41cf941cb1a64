"""Bad ``[options.ray] reuse_actors`` (issue 20) ends like every bad input (README,
"Failures"): rows of the bad-input table (tests/unit/fugue_tui/cli/test_bad_input_matrix.py), checked by
its own test on the real CLI."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli.test_bad_input_matrix import (
    Case,
    _batch,
)
from tests.unit.fugue_tui.cli.test_bad_input_matrix import (
    test_bad_input_exits_2_with_one_line_and_writes_nothing as _check,
)

CASES = [
    _batch('experiments = "D_hpo"\nexecutors = ["ray"]\n[options.ray]\nreuse_actors = "yes"\n',
           "options.ray", "key 'reuse_actors'", "boolean", "'yes'", id="ray-reuse-not-bool"),
    Case("ray-reuse-cli-typo", {}, ("run", "--exp", "D_hpo", "--exec", "ray", "--option",
                                    "ray.reuse_actor=true"),
         ("ray", "unknown key 'reuse_actor'", "did you mean 'reuse_actors'")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_ray_reuse_option(tmp_path, case: Case):
    _check(tmp_path, case)
