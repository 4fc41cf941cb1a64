"""mp's packing (issue 27) with real worker processes on the CPU, pinned as on GPUs: a cell
of four jobs over two (fake) devices, one job per device at a time, started from the
pre-warmed parent (torch imported, CUDA not). A spawned worker pins before torch is
imported (tests/unit/engine/executors/test_packing.py: nothing before the pin imports torch). The devices
are UUIDs, as the runner's plan hands them to the cell (tests/unit/engine/executors/test_packing.py
resolves them). Workers import torch: few, tiny jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.define.workloads import JobSpec
from engine.executors.base import CellContext
from engine.executors.mp.executor import MPExecutor
from engine.train.loop import TrainSettings

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[3]
DEVICES = ["GPU-pack-aaaa", "GPU-pack-bbbb"]


@pytest.fixture(autouse=True)
def probe_plugin(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS / "fixtures" / "plugins"))  # workers inherit it
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_packing_probe")
    monkeypatch.setenv("FUGUE_PROBE_DIR", str(tmp_path / "probe"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-the-cells-own")  # what the runner sets


def _job(i: int) -> JobSpec:
    return JobSpec(job_id=f"J{i}", exp_id="X", index=i, seed=42 + i, model="pin_probe",
                   dataset="wine", task=None, batch_size=32, epochs=1, lr=0.01,
                   optimizer="sgd")


def _run(tmp_path: Path, n_jobs: int, **options):
    events: list = []
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda kind, **f: events.append((kind, f)), threads=1,
                      options=options, attempt_dir=tmp_path / "attempt-1")
    jobs = [_job(i) for i in range(n_jobs)]
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
    finally:
        executor.teardown(ctx)
    probes = {int(p.stem.split("-")[1]): json.loads(p.read_text())
              for p in (tmp_path / "probe").glob("pin-*.json")}
    return results, ctx, events, probes


def test_jobs_round_robin_one_per_device_each_worker_pinned(tmp_path):
    results, ctx, events, probes = _run(tmp_path, 4, devices=DEVICES, jobs_per_device=1,
                                        start="forkserver", mps="auto")
    assert [r.status for r in results] == ["ok"] * 4, [r.error for r in results]
    # round-robin in job order, recorded in each job's row and the group's
    assert [r.device_uuid for r in results] == DEVICES * 2
    assert ctx.group["packed_devices"] == ",".join(DEVICES)
    assert ctx.group["jobs_per_device"] == 1 and ctx.group["mps_used"] is False
    info = ctx.group["executor_info"]
    assert info["packing"]["placement"] == DEVICES * 2
    # at most one job at a time per device (process life stamps), both devices at once
    workers = info["workers"]
    for device in DEVICES:
        spans = sorted((w["spawned_at"], w["ended_at"]) for w in workers.values()
                       if w["device"] == device)
        assert len(spans) == 2 and spans[0][1] <= spans[1][0], spans
    assert ctx.group["max_parallel"] == 2
    # each worker saw its own device: set before CUDA could start (torch was imported by
    # the pre-warmed parent, CUDA never), and the training code saw the same
    for r in results:
        pin = workers[r.job.job_id]["pin"]
        assert pin == {"visible": r.device_uuid, "torch_imported": True,
                       "cuda_initialized": False}
        assert probes[r.worker_pid] == {"visible": r.device_uuid, "cuda_initialized": False}
    # a CPU cell: the workers are pinned but train on the CPU, and the cell says so
    assert any(k == "warning" and "train on the CPU" in f["message"] for k, f in events)
