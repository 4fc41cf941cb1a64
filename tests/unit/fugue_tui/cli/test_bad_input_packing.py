"""Bad packing input (issue 27: ``devices`` and ``jobs_per_device`` of mp and ray) ends like
every bad input: one line naming the file, key and value, exit 2, nothing written — rows
of the matrix in tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by its own check (malformed
values that need no process, an empty list, a word, a repeated entry:
tests/unit/engine/executors/test_packing.py). The device rows plan against a fake NVML with two GPUs
(tests/fixtures/fake_nvml), so an unknown device is refused while planning, before any
cell starts."""

from __future__ import annotations

import json
import os

import pytest

from tests.fixtures.fake_nvml import device_config
from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_SITE = matrix.REPO / "tests" / "fixtures" / "fake_nvml_site"
_TWO = json.dumps([device_config(uuid="GPU-pack-0000"), device_config(uuid="GPU-pack-1111")])
_FAKE = {"FAKE_NVML_CONFIG": "{cwd}/nvml.json",
         "PYTHONPATH": os.pathsep.join([str(_SITE), str(matrix.REPO)])}


def _mp(options: str, *needles: str, id: str, env: dict | None = None,
        executors: str = '"mp"') -> matrix.Case:
    body = f'experiments = "D_ens"\nexecutors = [{executors}]\n{options}'
    return matrix.Case(id, {"c.toml": body, "nvml.json": _TWO}, ("--batch", "c.toml"),
                       ("c.toml", *needles), {**_FAKE, **(env or {})})


CASES = [
    _mp('[options.mp]\ndevices = ["cuda:0", "cuda:7"]\n', "options.mp", "key 'devices'",
        "'cuda:7'", "2 usable", id="packing-unknown-cuda-index"),
    _mp('[options.mp]\ndevices = ["GPU-pack-2222"]\n', "key 'devices'", "'GPU-pack-2222'",
        "GPU-pack-0000, GPU-pack-1111", id="packing-unknown-uuid"),
    _mp('[options.mp]\ndevices = ["MIG-nope-0"]\n', "key 'devices'", "'MIG-nope-0'",
        id="packing-unknown-mig"),
    _mp('[options.mp]\ndevices = ["cuda:1", "GPU-pack-1111"]\n', "key 'devices'",
        "same device", id="packing-duplicate-device"),
    _mp('[options.mp]\ndevices = ["cuda:1"]\n', "key 'devices'", "'cuda:1'",
        "CUDA_VISIBLE_DEVICES='GPU-pack-1111' lists 1",
        env={"CUDA_VISIBLE_DEVICES": "GPU-pack-1111"}, id="packing-outside-outer-visible"),
    _mp('[options.mp]\ndevices = ["cuda:0"]\njobs_per_device = 0\n', "key 'jobs_per_device'",
        ">= 1", id="packing-jobs-per-device-zero"),
    _mp('[options.mp]\ndevices = ["cuda:0"]\njobs_per_device = 1.5\n',
        "'jobs_per_device'", id="packing-jobs-per-device-float"),
    _mp('[options.mp]\njobs_per_device = 2\n', "key 'jobs_per_device'", "needs devices",
        id="packing-jobs-per-device-alone"),
    _mp('[options.mp]\ndevices = ["cuda:0", "cuda:1"]\nmps = "on"\n', "key 'mps'",
        "devices", id="packing-with-mps-on"),
    _mp('[options.seq]\ndevices = ["cuda:0"]\n', "options.seq", "key 'devices'", "applies to mp",
        executors='"seq"', id="packing-devices-on-seq"),
    _mp('[options.unified_model]\ndevices = "auto"\n', "options.unified_model",
        "key 'devices'", "applies to mp", executors='"unified_model"',
        id="packing-devices-on-unified"),
    matrix.Case("packing-cli-unknown-device", {"nvml.json": _TWO},
                ("run", "--exp", "D_ens", "--exec", "mp", "--option",
                 "mp.devices=cuda:0,cuda:3"),
                ("--option mp", "key 'devices'", "'cuda:3'", "2 usable"), _FAKE),
    _mp('[options.ray]\ndevices = ["cuda:0"]\naddress = "127.0.0.1:9"\n', "options.ray",
        "key 'devices'", "address", executors='"ray"', id="packing-ray-with-address"),
    matrix.Case("packing-ray-hpo", {"c.toml": 'experiments = "D_hpo"\nexecutors = ["ray"]\n'
                                              '[options.ray]\ndevices = ["cuda:0"]\n',
                                    "nvml.json": _TWO},
                ("--batch", "c.toml"), ("c.toml", "key 'devices'", "'D_hpo'"), _FAKE),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_packing(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)


@pytest.mark.skipif(matrix._HAS_GPU, reason="this machine's NVML sees a GPU")
def test_packing_without_nvml(tmp_path):
    """No driver (this machine's real pynvml, no fake): "auto" has nothing to pack onto."""
    case = matrix.Case("packing-no-nvml",
                       {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n'
                                  '[options.mp]\ndevices = "auto"\n'},
                       ("--batch", "c.toml"), ("c.toml", "key 'devices'", "NVML"))
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
