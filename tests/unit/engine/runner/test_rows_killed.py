"""The rows of a cell that did not end well say what is known about it: the row the runner
writes for a killed or crashed cell names the group the cell ran as (its samples file, the
monitor's files) and the device the runner resolved; an ``mp`` job whose worker died keeps
what it reported by its last epoch end (``epochs_run``, samples, validation).

The runner side runs with stand-in cells (no torch) and, for the device, a fake NVML at the
hardware boundary (tests/fixtures/mps/fake_nvml); the ``mp`` case spawns one real worker."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.measure.samples import read_samples
from engine.results.columns import GROUPS_FILE
from engine.results.read import read_rows
from engine.results.rows import failed_group_row
from engine.runner.control import send
from engine.runner.supervisor import Runner
from tests.unit.engine.cell.cell_specs import hand_spec

REPO = Path(__file__).resolve().parents[4]
TESTS = REPO / "tests"

CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
passes = 1
device = "{device}"
runs_dir = "{runs}"
"""

#: A torch-free cell: names its group as engine.cell.main does, says it started, then
#: either starts the real monitor sidecar and waits to be killed, or dies at once.
STAND_IN = """
import json, os, sys, time
from pathlib import Path
from engine.cell.sidecar import CellMonitor
from engine.events import EventWriter
from engine.results.values import new_group_id
spec = json.load(open(sys.argv[1]))
group_id = spec.get("group_id") or new_group_id(spec["cell"]["executor"])
Path(spec["events"]).with_name("group_id.txt").write_text(group_id)
events = EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"])
events.emit("started", pid=os.getpid(), exp_id=spec["cell"]["exp_id"],
            executor=spec["cell"]["executor"], jobs=[])
if sys.argv[2] == "crash":
    sys.exit(1)
monitor = CellMonitor(spec["runs_dir"], group_id, spec["events"], spec["cell"]["key"],
                      spec["attempt"], None, 0.05)
assert monitor.start(), monitor.problem
time.sleep(600)
"""


@pytest.fixture
def stand_in(monkeypatch):
    """Cells that run :data:`STAND_IN` (``how``: "monitor" or "crash")."""
    how = {"mode": "monitor"}
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            return subprocess.Popen([sys.executable, "-c", STAND_IN, str(spec_path),
                                     how["mode"]], stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    return how


def _campaign(tmp_path: Path, device: str = "cpu") -> Path:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(device=device, runs=tmp_path / "runs"))
    return path


def _attempt_dir(tmp_path: Path) -> Path:
    (folder,) = (tmp_path / "runs" / "c" / "cells").glob("*/attempt-1")
    return folder


def test_a_killed_cell_row_names_its_group_and_the_samples_its_monitor_wrote(tmp_path,
                                                                               stand_in):
    runner = Runner(load_campaign(_campaign(tmp_path)))

    def kill_once_sampling():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = list((tmp_path / "runs" / "c" / "cells").glob("*/attempt-1/monitor.json"))
            if found:
                send(tmp_path / "runs" / "c", "kill", "1")
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_once_sampling, daemon=True)
    killer.start()
    outcome = runner.run()
    killer.join(5)
    assert [o.status for o in outcome.outcomes] == ["killed"]
    (row,) = read_rows(tmp_path / "runs" / GROUPS_FILE)
    group_id = (_attempt_dir(tmp_path) / "group_id.txt").read_text()
    assert row["status"] == "killed" and row["group_id"] == group_id
    # SIGTERM reached the sidecar with the cell: it took its last sample and finished the
    # file under its final name, which the row names (relative to the runs folder)
    assert row["samples_file"] == f"samples/{group_id}.csv"
    samples = read_samples(tmp_path / "runs" / row["samples_file"])
    assert len(samples) >= 2
    meta = json.loads((_attempt_dir(tmp_path) / "monitor.json").read_text())
    assert meta["state"] == "stopped" and Path(meta["samples_file"]).name == f"{group_id}.csv"
    assert row["monitor_interval_s"] == "0.05"


def test_a_crashed_cuda_cell_row_keeps_the_device_the_runner_resolved(tmp_path, stand_in,
                                                                      monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "pynvml", TESTS / "fixtures" / "mps" / "fake_nvml" / "pynvml.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    stand_in["mode"] = "crash"
    runner = Runner(load_campaign(_campaign(tmp_path, device="cuda")))
    assert runner.gpu["uuid"] == "GPU-fake-0"
    runner.run()
    (row,) = read_rows(tmp_path / "runs" / GROUPS_FILE)
    assert row["status"] == "failed" and row["device"] == "cuda"
    assert row["gpu_uuid"] == "GPU-fake-0" and row["gpu_name"] == "Fake GPU"
    assert row["group_id"] == (_attempt_dir(tmp_path) / "group_id.txt").read_text()
    assert row["samples_file"] == ""  # this cell died before its monitor started


def test_a_samples_file_its_sampler_never_finished_is_named_as_it_is(tmp_path):
    """The rule: ``<group_id>.csv`` is a file the sampler finished; ``.csv.partial`` one it
    could not (SIGKILL, a crash). The row names whichever is on disk."""
    runs = tmp_path / "runs"
    attempt = runs / "c" / "cells" / "001-D_ens-seq-p1-aaaa" / "attempt-1"
    attempt.mkdir(parents=True)
    (runs / "samples").mkdir()
    (runs / "samples" / "seq_0badf00d.csv.partial").write_text("t,time\n1.0,2.0\n")
    (attempt / "monitor.json").write_text(json.dumps(
        {"interval_s": 0.5, "state": "running", "gpu": None,
         "samples_file": str(runs / "samples" / "seq_0badf00d.csv")}))
    spec = hand_spec(runs, events=str(attempt / "events.jsonl"), group_id="seq_0badf00d")
    row = failed_group_row(spec, "killed", "hung")
    assert row["group_id"] == "seq_0badf00d"
    assert row["samples_file"] == "samples/seq_0badf00d.csv.partial"
    assert row["monitor_interval_s"] == 0.5


# --------------------------------------------------------------------------- mp


@pytest.mark.slow
def test_an_mp_job_whose_worker_died_keeps_its_finished_epochs(tmp_path, monkeypatch):
    """A worker SIGKILLed in its second epoch: the job fails saying so, with the epoch it
    finished (epochs_run 1, its samples and validation), not as if it never trained."""
    import torch

    from engine.define.workloads import JobSpec
    from engine.executors.base import CellContext
    from engine.executors.mp.executor import MPExecutor
    from engine.train.loop import TrainSettings

    probe = tmp_path / "probe"
    monkeypatch.syspath_prepend(str(TESTS / "fixtures" / "plugins"))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_rows_probe")  # spawned workers load it
    monkeypatch.setenv("FUGUE_PROBE_DIR", str(probe))
    job = JobSpec(job_id="J0", exp_id="X", index=0, seed=42, model="block_in_epoch_2",
                  dataset="wine", task=None, batch_size=16, epochs=3, lr=0.01,
                  optimizer="sgd", validate_every_epoch=True)

    def kill_when_blocked():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            marks = list(probe.glob("blocked-*")) if probe.exists() else []
            if marks:
                os.kill(int(marks[0].name.split("-")[1]), signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_blocked, daemon=True)
    killer.start()
    events: list = []
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda kind, **f: events.append((kind, f)), threads=1,
                      options={}, max_parallel=1, attempt_dir=tmp_path / "attempt-1")
    executor = MPExecutor()
    executor.setup([job], ctx)
    try:
        (result,) = executor.run([job], ctx)
    finally:
        executor.teardown(ctx)
    assert result.status == "failed" and "killed by SIGKILL" in result.error
    epoch_ends = [f for k, f in events if k == "job_progress" and f.get("epoch_end")]
    assert [f["epoch"] for f in epoch_ends] == [1]
    assert result.epochs_run == 1
    assert result.samples == epoch_ends[0]["samples"] > 0
    assert result.final_val_acc == epoch_ends[0]["val_acc"] is not None
    assert [h["epoch"] for h in result.history] == [1]
    assert result.total_time_s is None  # when it died is not known: empty, never invented
