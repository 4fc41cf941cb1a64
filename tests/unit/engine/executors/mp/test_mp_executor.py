"""The ``mp`` executor in this process, with real spawned workers: slot refill after a
worker is killed, distinct pids, and the MPS daemon's life around the group (stand-in
``nvidia-cuda-mps-control`` on PATH, fake NVML in ``sys.modules`` — the hardware boundary
only). Each worker is a fresh interpreter importing torch (seconds of CPU), so the jobs are
tiny and few."""

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

import psutil
import pytest
import torch

from engine.define.workloads import JobSpec
from engine.errors import FugueError
from engine.executors.base import CellContext
from engine.executors.mp import mps_checks
from engine.executors.mp.executor import MPS_RECORD, MPExecutor
from engine.train.loop import TrainSettings

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[4]
MPS_FIXTURES = TESTS / "fixtures" / "mps"


@pytest.fixture(autouse=True)
def plugins(monkeypatch):
    # spawned workers get this process's sys.path and environment
    for folder in (TESTS / "fixtures" / "plugins", MPS_FIXTURES):
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_test_plugin,fugue_mps_probe")


@pytest.fixture
def gpu_boundary(tmp_path, monkeypatch):
    """A GPU as NVML reports it (fake pynvml) and the stand-in MPS control binary on PATH."""
    spec = importlib.util.spec_from_file_location("pynvml", MPS_FIXTURES / "fake_nvml" / "pynvml.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", "DEFAULT")
    sys.path.insert(0, str(MPS_FIXTURES))
    import standin_control

    exe = standin_control.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    yield exe
    for proc in psutil.process_iter():
        try:
            if str(exe) in proc.cmdline():
                proc.kill()
        except psutil.Error:
            pass


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _job(i: int, model: str = "mlp", epochs: int = 1) -> JobSpec:
    return JobSpec(job_id=f"J{i}", exp_id="X", index=i, seed=42 + i, model=model,
                   dataset="wine", task=None, batch_size=16, epochs=epochs, lr=0.01,
                   optimizer="sgd")


def _ctx(tmp_path: Path, events: list, **options) -> CellContext:
    return CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                       emit=lambda kind, **f: events.append((kind, f)), threads=1,
                       options=options, max_parallel=options.get("max_parallel"),
                       attempt_dir=tmp_path / "attempt-1")


def test_killed_worker_fails_its_job_slot_refilled_rest_complete(tmp_path, monkeypatch):
    """One slot: job 0 blocks inside its first forward and the test SIGKILLs its worker
    there (mid-job); job 0 fails saying so, and job 1 then gets the slot and completes."""
    probe = tmp_path / "probe"
    monkeypatch.setenv("FUGUE_PROBE_DIR", str(probe))
    jobs = [_job(0, "mark_and_block"), _job(1)]
    events: list = []

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
    ctx = _ctx(tmp_path, events, max_parallel=1, start="spawn")  # forkserver: its own tests
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
    finally:
        executor.teardown(ctx)
    killed = int(next(probe.glob("blocked-*")).name.split("-")[1])
    assert [r.job.job_id for r in results] == ["J0", "J1"]
    assert [r.status for r in results] == ["failed", "ok"]
    assert results[0].error == f"worker process {killed} was killed by SIGKILL before reporting a result"
    assert results[0].worker_pid == killed
    # J1 started only after J0 ended: the slot was refilled, never two at once
    order = [(k, f["job_id"]) for k, f in events if k in ("job_started", "job_done")]
    assert order == [("job_started", "J0"), ("job_done", "J0"), ("job_started", "J1"),
                     ("job_done", "J1")]
    assert any(k == "job_progress" and f["job_id"] == "J1" for k, f in events)
    assert ctx.group["max_parallel"] == 1 and ctx.group["mps_used"] is False
    worker_pids = [r.worker_pid for r in results]
    assert len(set(worker_pids) | {os.getpid()}) == 3  # one fresh process per job
    info = ctx.group["executor_info"]
    assert info["workers"]["J0"]["exit"] == -signal.SIGKILL and info["spawn"] == "spawn"
    assert info["workers"]["J1"]["exit"] == 0 and info["workers"]["J1"]["setup_s"] > 0
    assert "train_throughput_sps" not in ctx.group  # a failed group measured nothing
    assert all(_gone(p) for p in worker_pids)


def test_mps_clients_get_the_env_and_the_daemon_is_quit(tmp_path, gpu_boundary, monkeypatch):
    """mps = "on" with a GPU that NVML reports: our daemon for the group, its variables in
    the workers only, a foreign daemon reported and untouched; quit after a good group and
    after a failed one."""
    probe = tmp_path / "probe"
    monkeypatch.setenv("FUGUE_PROBE_DIR", str(probe))
    foreign_pipe = tmp_path / "foreign"
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(foreign_pipe)}
    subprocess.run([str(gpu_boundary), "-d"], env=env, check=True, timeout=30)
    before = dict(os.environ)
    clients: dict[str, list[int]] = {}
    for attempt, jobs in (("ok", [_job(0, "env_probe"), _job(1, "env_probe")]),
                          ("failed", [_job(0, "explode_on_step")])):
        events: list = []
        ctx = _ctx(tmp_path / attempt, events, mps="on", start="spawn")
        executor = MPExecutor()
        executor.setup(jobs, ctx)
        daemon = executor.daemon
        record = tmp_path / attempt / "attempt-1" / "cleanup" / f"{MPS_RECORD}.json"
        assert json.loads(record.read_text())["info"]["pid"] == daemon.pid
        assert dict(os.environ) == before  # the cell itself is no client
        try:
            results = executor.run(jobs, ctx)
        finally:
            executor.teardown(ctx)
        assert [r.status for r in results] == [attempt] * len(jobs)
        pct = 100 // len(jobs)
        assert ctx.group["mps_used"] is True and ctx.group["mps_thread_pct"] == pct
        assert ctx.group["mps_present"] is True and ctx.group["gpu_compute_mode"] == "DEFAULT"
        info = ctx.group["executor_info"]
        # the foreign daemon is reported and ours is not; another test's private daemon,
        # running beside this one (scripts/test's parallel phase), may be reported too
        foreign = [d["pipe_dir"] for d in info["foreign_mps"]]
        assert str(foreign_pipe) in foreign and str(daemon.pipe_dir) not in foreign
        assert info["mps_pipe_dir"] == str(daemon.pipe_dir) and "stopped" in info["mps_quit"]
        assert not record.exists() and not daemon.root.exists()
        if attempt == "ok":  # training wall time: the union of the jobs' epoch spans
            assert 0 < info["train_wall_s"] <= sum(r.train_time_s for r in results) + 1e-6
            assert ctx.group["train_throughput_sps"] == pytest.approx(
                sum(r.samples for r in results) / info["train_wall_s"])
        assert _gone(daemon.pid)
        clients[attempt] = [r.worker_pid for r in results]
        log = (tmp_path / attempt / "attempt-1" / "mps" / "control.log").read_text()
        assert "command 'quit'" in log
    seen = [json.loads(p.read_text()) for p in probe.glob("*.json")]
    assert sorted(s["pid"] for s in seen) == sorted(clients["ok"])  # explode_on_step has no probe
    for s in seen:
        assert s["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert s["env"]["CUDA_MPS_PIPE_DIRECTORY"].endswith("/pipe")
        assert s["env"]["CUDA_MPS_PIPE_DIRECTORY"] != str(foreign_pipe)
        assert s["threads"] == 1 and s["ppid"] == os.getpid()
    assert (foreign_pipe / "control").exists()  # the foreign daemon still serves
    subprocess.run([str(gpu_boundary)], input="quit\n", text=True, env=env, timeout=30)


@pytest.mark.parametrize("mode, options, needle", [
    ("PROHIBITED", {"mps": "auto"}, "compute mode PROHIBITED"),
    ("EXCLUSIVE_PROCESS", {"mps": "off"}, "compute mode EXCLUSIVE_PROCESS and no MPS daemon"),
])
def test_compute_mode_refused_before_anything_starts(tmp_path, gpu_boundary, monkeypatch,
                                                     mode, options, needle):
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", mode)
    ctx = _ctx(tmp_path, [], **options)
    ctx.settings = TrainSettings(device=torch.device("cuda", 0))  # never touched: refused first
    with pytest.raises(FugueError) as err:
        MPExecutor().setup([_job(0)], ctx)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "attempt-1" / "cleanup").exists()


def test_exclusive_process_with_our_daemon_is_accepted(tmp_path, gpu_boundary, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", "EXCLUSIVE_PROCESS")
    ctx = _ctx(tmp_path, [], mps="auto", start="spawn")
    ctx.settings = TrainSettings(device=torch.device("cuda", 0))
    executor = MPExecutor()
    executor.setup([_job(0), _job(1), _job(2)], ctx)
    try:
        assert ctx.group["mps_used"] is True and ctx.group["mps_thread_pct"] == 33
        assert ctx.group["gpu_compute_mode"] == "EXCLUSIVE_PROCESS"
    finally:
        executor.teardown(ctx)
    assert "stopped" in ctx.group["executor_info"]["mps_quit"]


def test_exclusive_process_without_the_binary_is_refused(tmp_path, monkeypatch, gpu_boundary):
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", "EXCLUSIVE_PROCESS")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setattr(mps_checks, "FALLBACK_DIRS", ())
    ctx = _ctx(tmp_path, [], mps="auto")
    ctx.settings = TrainSettings(device=torch.device("cuda", 0))
    with pytest.raises(FugueError, match="EXCLUSIVE_PROCESS.*; MPS: nvidia-cuda-mps-control "
                                         "not found"):
        MPExecutor().setup([_job(0), _job(1)], ctx)
    ctx = _ctx(tmp_path, [], mps="on")
    with pytest.raises(FugueError, match="mps = \"on\" but MPS cannot run: nvidia-cuda-mps-control not found"):
        MPExecutor().setup([_job(0)], ctx)
