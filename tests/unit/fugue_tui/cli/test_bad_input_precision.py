"""Bad precision input (issue 26) ends like every bad input: one line naming the file, key
and value (with the nearest valid one), exit 2, nothing written — rows of the matrix in
tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check. The last rows plan on a fake
GPU (the fake NVML of tests/fixtures, a Tesla T4: compute capability 7.5) that cannot run
bfloat16 or TF32: refused while planning, before any cell starts."""

from __future__ import annotations

import json
import os

import pytest

from tests.fixtures.fake_nvml import device_config
from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_SITE = matrix.REPO / "tests" / "fixtures" / "fake_nvml_site"
_T4 = json.dumps([device_config(uuid="GPU-t4-precision", compute_capability=[7, 5])])
_TWO_T4 = json.dumps([device_config(uuid=f"GPU-t4-{n}", compute_capability=[7, 5])
                      for n in "ab"])
_FAKE_GPU = {"FAKE_NVML_CONFIG": "{cwd}/nvml.json",
             "PYTHONPATH": os.pathsep.join([str(_SITE), str(matrix.REPO)]),
             "CUDA_VISIBLE_DEVICES": "GPU-t4-precision"}

CASES = [
    matrix._batch('experiments = "D_ens"\nprecision = "fp8"\n', "key 'precision'", "'fp8'",
                  "fp32, tf32, amp-fp16, amp-bf16, bf16", id="precision-fp8"),
    matrix._batch('experiments = "D_ens"\nprecision = "bf61"\n', "'bf61'",
                  "did you mean 'bf16'", id="precision-typo"),
    matrix._batch('experiments = "D_ens"\nprecision = []\n', "key 'precision'", "empty list",
                  id="precision-empty-list"),
    matrix._batch('experiments = "D_ens"\nprecision = ["fp32", "fp8"]\n', "'fp8'",
                  id="precision-list-bad-element"),
    matrix._batch('experiments = "D_ens"\nprecision = 16\n', "'precision'",
                  id="precision-wrong-type"),
    matrix._batch('experiments = "D_ens"\namp = true\nprecision = "bf16"\n',
                  "'amp' and 'precision' are both set", id="precision-and-amp"),
    matrix._batch('experiments = "D_ens"\namp = "yes"\n', "'amp'", id="amp-not-bool"),
    matrix._with_exps('[experiments.D_ens]\nprecision = "fp8"\n', "experiments.D_ens",
                      "'fp8'", id="experiment-precision-fp8"),
    matrix._with_exps('[experiments.X1]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "wine"\n'
                      'k = 2\nbatch_size = 16\nepochs = 1\nlr = 0.01\namp = true\nprecision = "bf16"\n',
                      "experiments.X1", "'amp' and 'precision' are both set",
                      campaign='experiments = "X1"\n', id="experiment-precision-and-amp"),
    matrix.Case("cli-precision-fp8", {}, ("run", "--exp", "D_ens", "--precision", "fp8"),
                ("--precision", "'fp8'", "amp-bf16")),
    matrix.Case("cli-precision-empty", {}, ("run", "--exp", "D_ens", "--precision", ""),
                ("--precision", "empty")),
    matrix.Case("precision-bf16-on-a-t4",
                {"c.toml": 'experiments = "D_ens"\ndevice = "cuda"\n'
                           'precision = ["fp32", "bf16"]\n', "nvml.json": _T4},
                ("--batch", "c.toml", "--dry-run"),
                ("c.toml", "'bf16'", "compute capability 8.0+", "7.5", "Tesla T4"), _FAKE_GPU),
    matrix.Case("precision-tf32-on-a-t4-experiment-default",
                {"c.toml": 'experiments = "D_ens"\ndevice = "cuda"\n'
                           'experiments_file = "mine.toml"\n',
                 "mine.toml": '[experiments.D_ens]\nprecision = "tf32"\n', "nvml.json": _T4},
                ("--batch", "c.toml", "--dry-run"), ("'tf32'", "7.5"), _FAKE_GPU),
    # a several-device campaign's refusal names its 'devices' (it said device 'auto')
    matrix.Case("precision-bf16-on-two-t4s",
                {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n'
                           'devices = ["GPU-t4-a", "GPU-t4-b"]\nprecision = "bf16"\n',
                 "nvml.json": _TWO_T4},
                ("--batch", "c.toml", "--dry-run"),
                ("c.toml", "devices ['GPU-t4-a', 'GPU-t4-b']", "'bf16'", "7.5"),
                {**_FAKE_GPU, "CUDA_VISIBLE_DEVICES": "GPU-t4-a,GPU-t4-b"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_precision(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
