"""ray's packing (issue 27) on a real private Ray runtime on the CPU: four jobs over two
(fake) GPU UUIDs, one job per device at a time. The runtime gets the UUIDs as its GPU ids;
Ray pins each actor (a 1/jobs_per_device GPU share) by CUDA_VISIBLE_DEVICES before the
actor's code runs, and each device's jobs (i mod n) go to its actors. Run in a subprocess,
as the other Ray tests (tests/e2e/test_ray.py): Ray leaves state in the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from pathlib import Path

import torch

from engine.define.workloads import JobSpec
from engine.executors.base import CellContext
from engine.executors.ray.actors import RayExecutor
from engine.train.loop import TrainSettings

attempt = Path(sys.argv[1]) / "attempt-1"
attempt.mkdir(parents=True)
jobs = [JobSpec(job_id=f"J{i}", exp_id="X", index=i, seed=42 + i, model="mlp",
                dataset="wine", task=None, batch_size=32, epochs=1, lr=0.01, optimizer="sgd")
        for i in range(4)]
events = []
ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                  emit=lambda kind, **f: events.append([kind, f]), threads=1,
                  options={"devices": ["GPU-pack-aaaa", "GPU-pack-bbbb"],
                           "jobs_per_device": 1}, attempt_dir=attempt)
ex = RayExecutor()
ex.setup(jobs, ctx)
try:
    results = ex.run(jobs, ctx)
finally:
    ex.teardown(ctx)
info = ex.info
print(json.dumps({"status": [r.status for r in results], "errors": [r.error for r in results],
                  "device": [r.device_uuid for r in results],
                  "packed_devices": ctx.group.get("packed_devices"),
                  "jobs_per_device": ctx.group.get("jobs_per_device"),
                  "visible": info.get("actor_visible"), "packing": info.get("packing"),
                  "per_actor": info.get("per_actor"),
                  "cuda_init": info.get("actor_cuda_initialized"),
                  "warnings": [f["message"] for k, f in events if k == "warning"]}))
"""


def test_ray_actors_pinned_by_ray_and_jobs_round_robin(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    devices = ["GPU-pack-aaaa", "GPU-pack-bbbb"]
    assert out["status"] == ["ok"] * 4, out["errors"]
    assert out["device"] == devices * 2  # job i on device i mod 2
    assert sorted(out["visible"]) == devices  # one actor on each, pinned by Ray
    assert out["per_actor"]["GPU"] == 1.0 and out["cuda_init"] == [False, False]
    assert out["packed_devices"] == ",".join(devices) and out["jobs_per_device"] == 1
    assert out["packing"]["placement"] == devices * 2
    assert any("train on the CPU" in w for w in out["warnings"])
