"""On a real GPU only (bench/gpu_check.py's part test_gpu_cells): NVML through the monitor,
and a real cuda cell filling the GPU columns. pytest-free (see tests/gpu/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

from engine.results.read import read_rows

ROOT = Path(__file__).resolve().parents[2]


def _device_under_test() -> dict:
    from engine.measure.nvml import resolve_gpu

    found = resolve_gpu("cuda", os.environ)
    if not found:
        raise unittest.SkipTest("needs a CUDA GPU (none visible through NVML)")
    return found


def test_real_nvml_device_under_test():
    from engine.measure.nvml import open_gpu

    found = _device_under_test()
    gpu = open_gpu(found["uuid"])
    assert "memory" in gpu.supported  # every NVIDIA GPU and MIG slice reports memory
    assert gpu.facts["gpu_name"] and gpu.facts["gpu_uuid"] == found["uuid"]
    values, errors = gpu.read()
    assert errors == [] and values["mem_used_mib"] > 0


def test_cuda_cell_fills_gpu_columns(tmp_path):
    _device_under_test()
    (tmp_path / "exps.toml").write_text(
        '[experiments.G_tiny]\ntype = "ensemble"\nmodel = "simplecnn"\ndataset = "digits"\n'
        'k = 2\nbatch_size = 64\nepochs = 3\nlr = 0.05\noptimizer = "sgd"\n')
    (tmp_path / "c.toml").write_text(
        f'name = "gpu"\nexperiments = "G_tiny"\nexecutors = ["seq"]\ndevice = "cuda"\n'
        f'threads = 1\nruns_dir = "{tmp_path / "runs"}"\nexperiments_file = "exps.toml"\n'
        f'monitor_interval_s = 0.1\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "engine.runner", str(tmp_path / "c.toml")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    group = read_rows(tmp_path / "runs" / "master_groups.csv")[-1]
    # forked from the runner's zygote, which never initialised CUDA: the cell's own first
    # CUDA call found the device under test (docs/measurement.md, "How a cell starts")
    assert group["cell_start"] == "zygote", (tmp_path / "runs" / "gpu" / "zygote.log")
    assert group["gpu_uuid"].startswith(("GPU-", "MIG-"))
    assert float(group["vram_peak_mb"]) > 0
    assert group["energy_method"] in ("nvml_energy_counter", "power_integral", "none")
    if group["energy_method"] != "none":
        assert float(group["energy_group"]) > 0
    jobs = read_rows(tmp_path / "runs" / "master_individual.csv")
    assert all(float(j["torch_peak_allocated_mb"]) > 0 for j in jobs)
