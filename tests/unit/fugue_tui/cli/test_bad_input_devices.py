"""Bad ``devices`` input (issue 27) ends like every bad input: one line naming the file,
key and value, exit 2, nothing written (rows of tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by
its own check). The NVML rows plan on the fake NVML of tests/fixtures (an A100 in MIG mode
with two slices, two T4s): refused while planning, before any cell starts."""

from __future__ import annotations

import json
import os

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_SITE = matrix.REPO / "tests" / "fixtures" / "fake_nvml_site"
_HOST = json.dumps({"devices": [
    {"uuid": "GPU-a100", "name": "NVIDIA A100-SXM4-40GB",
     "migs": [{"uuid": "MIG-s1"}, {"uuid": "MIG-s2"}]},
    {"uuid": "GPU-t4-0"}, {"uuid": "GPU-t4-1"}]})
_FAKE = {"FAKE_NVML_CONFIG": "{cwd}/nvml.json",
         "PYTHONPATH": os.pathsep.join([str(_SITE), str(matrix.REPO)])}


def _gpu(id: str, devices: str, *needles: str, env: dict | None = None,
         argv: tuple[str, ...] = ("--batch", "c.toml", "--dry-run")) -> matrix.Case:
    return matrix.Case(id, {"c.toml": f'experiments = "D_ens"\ndevices = {devices}\n',
                            "nvml.json": _HOST}, argv, needles, {**_FAKE, **(env or {})})


CASES = [
    matrix._batch('experiments = "D_ens"\ndevices = ["cuda:0", "cuda:0"]\n', "key 'devices'",
                  "'cuda:0' is listed twice", id="devices-duplicate"),
    matrix._batch('experiments = "D_ens"\ndevices = ["gpu1"]\n', "key 'devices'", "'gpu1'",
                  id="devices-unknown-form"),
    matrix._batch('experiments = "D_ens"\ndevices = []\n', "key 'devices'", "empty",
                  id="devices-empty"),
    matrix._batch('experiments = "D_ens"\ndevices = 2\n', "'devices'", id="devices-wrong-type"),
    matrix._batch('experiments = "D_ens"\ndevices = ["auto", "cuda:1"]\n', "'auto'",
                  "stands alone", id="devices-auto-in-a-list"),
    matrix._batch('experiments = "D_ens"\ndevice = "cpu"\ndevices = ["cuda:0"]\n',
                  "'device' and 'devices' are both set", id="device-and-devices"),
    matrix._batch('experiments = "D_ens"\none_cell_per_host = "yes"\n', "'one_cell_per_host'",
                  id="one-cell-per-host-not-bool"),
    matrix.Case("cli-device-and-devices", {}, ("run", "--exp", "D_ens", "--device", "cpu",
                                               "--devices", "auto"),
                ("--device and --devices",)),
    matrix.Case("cli-devices-duplicate", {}, ("run", "--exp", "D_ens", "--devices",
                                              "cuda:0,cuda:0"),
                ("--devices", "listed twice")),
    _gpu("devices-mig-uuid-missing", '["MIG-s1", "MIG-gone"]', "c.toml", "'MIG-gone'",
         "matches 0 MIG slice", "MIG-s1, MIG-s2"),
    _gpu("devices-gpu-uuid-missing", '["GPU-nope"]', "c.toml", "'GPU-nope'", "matches 0 GPU"),
    _gpu("devices-index-beyond", '["cuda:0", "cuda:7"]', "c.toml", "cuda:7", "NVML sees 3"),
    _gpu("devices-same-device-twice", '["cuda:1", "GPU-t4-0"]', "c.toml", "same device",
         "GPU-t4-0"),
    _gpu("devices-two-models", '["cuda:1", "MIG-s1"]', "c.toml", "different GPU models",
         "Tesla T4"),
    _gpu("devices-outside-outer-visible", '["GPU-t4-0"]', "c.toml",
         "not among CUDA_VISIBLE_DEVICES", env={"CUDA_VISIBLE_DEVICES": "2"}),
    _gpu("devices-mig-uuid-missing-in-outer-visible", '"auto"', "c.toml", "'MIG-gone'",
         env={"CUDA_VISIBLE_DEVICES": "MIG-gone"}),
    # today's one `device`: a MIG UUID in CUDA_VISIBLE_DEVICES must exist too
    matrix.Case("device-mig-uuid-missing-in-outer-visible",
                {"c.toml": 'experiments = "D_ens"\ndevice = "cuda"\n', "nvml.json": _HOST},
                ("--batch", "c.toml", "--dry-run"), ("'MIG-gone'", "matches 0 MIG"),
                {**_FAKE, "CUDA_VISIBLE_DEVICES": "MIG-gone"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_devices(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
