"""``engine.executors.mp.mps`` against real processes: a stand-in ``nvidia-cuda-mps-control`` that really
daemonises (``tests/fixtures/mps/standin_control.py``) and a fake NVML that raises the real
nvidia-ml-py exceptions (``tests/fixtures/mps/fake_nvml``). Torch-free and quick."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine import cleanup
from engine.errors import FugueError
from engine.executors.mp import mps, mps_checks

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures" / "mps"
sys.path.insert(0, str(FIXTURES))
import standin_control  # noqa: E402


@pytest.fixture
def fake_nvml(monkeypatch):
    """The fake ``pynvml`` in ``sys.modules``: the hardware boundary, nothing else."""
    spec = importlib.util.spec_from_file_location("pynvml", FIXTURES / "fake_nvml" / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", "DEFAULT")
    return module


@pytest.fixture
def control(tmp_path, monkeypatch):
    """The stand-in control binary, first on PATH; every daemon it started is quit after."""
    exe = standin_control.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    yield str(exe)
    for proc in psutil.process_iter():
        try:
            if str(exe) in proc.cmdline():
                proc.kill()
        except psutil.Error:
            pass


def _gone(pid: int) -> bool:
    """Exited (a zombie waits for init: a double-forked daemon is nobody's child)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_foreign(control: str, pipe_dir: Path) -> int:
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe_dir),
           "CUDA_MPS_LOG_DIRECTORY": str(pipe_dir.parent / "foreign-log")}
    subprocess.run([control, "-d"], env=env, check=True, timeout=30)
    for _ in range(500):
        if (pipe_dir / mps.PID_FILE).exists():
            return int((pipe_dir / mps.PID_FILE).read_text())
        time.sleep(0.02)
    raise AssertionError("the foreign stand-in daemon did not start")


def test_find_control_path_then_usr_sbin(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(mps_checks, "FALLBACK_DIRS", (str(tmp_path / "sbin"),))
    assert mps_checks.find_control() is None
    sbin = standin_control.install(tmp_path / "sbin")
    assert mps_checks.find_control() == str(sbin)
    on_path = standin_control.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert mps_checks.find_control() == str(on_path)


@pytest.mark.parametrize("mode", ["DEFAULT", "EXCLUSIVE_PROCESS", "PROHIBITED"])
def test_compute_mode_read_through_nvml(fake_nvml, monkeypatch, mode):
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", mode)
    assert mps_checks.compute_mode(0) == mode
    assert mps_checks.gpu_visible(0) and not mps_checks.gpu_visible(1)


def test_compute_mode_unreadable_is_none(fake_nvml, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_COMPUTE_MODE", "NOT_SUPPORTED")  # NVMLError_NotSupported
    assert mps_checks.compute_mode(0) is None
    assert mps_checks.compute_mode(3) is None  # NVMLError_InvalidArgument: no such GPU
    monkeypatch.setenv("FAKE_NVML_NO_DRIVER", "1")  # NVMLError_DriverNotLoaded
    assert mps_checks.compute_mode(0) is None and not mps_checks.gpu_visible(0)


def test_compute_mode_refusals_are_one_line():
    for mode, running in (("PROHIBITED", True), ("PROHIBITED", False),
                          ("EXCLUSIVE_PROCESS", False)):
        with pytest.raises(FugueError) as err:
            mps_checks.check_compute_mode(mode, 0, mps_running=running)
        assert mode in str(err.value) and "\n" not in str(err.value)
    for mode in ("DEFAULT", None):
        mps_checks.check_compute_mode(mode, 0, mps_running=False)
    mps_checks.check_compute_mode("EXCLUSIVE_PROCESS", 0, mps_running=True)


def test_thread_percentage_splits_the_gpu_evenly():
    assert [mps_checks.thread_percentage(n) for n in (1, 2, 3, 7, 150)] == [100, 50, 33, 14, 1]


def test_private_daemon_lifecycle(control, tmp_path):
    before = dict(os.environ)
    daemon = mps.MPSDaemon.start(control, log_dir=tmp_path / "run" / "mps")
    try:
        pipe = str(daemon.pipe_dir)
        assert (pipe != mps_checks.DEFAULT_PIPE_DIR
                and not pipe.startswith(mps_checks.DEFAULT_PIPE_DIR))
        assert len(pipe) + len("/control") < mps.SOCKET_PATH_LIMIT
        assert oct(daemon.root.stat().st_mode & 0o777) == "0o700"
        proc = psutil.Process(daemon.pid)
        # it left our session (double fork): only the cleanup record can reach it
        assert os.getsid(daemon.pid) != os.getsid(0) and proc.ppid() != os.getpid()
        assert proc.environ()["CUDA_MPS_PIPE_DIRECTORY"] == pipe
        assert daemon.working()
        assert daemon.client_env(33) == {"CUDA_MPS_PIPE_DIRECTORY": pipe,
                                         "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "run" / "mps"),
                                         "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "33"}
        assert dict(os.environ) == before  # nothing exported to this process
    finally:
        message = daemon.quit(grace=2)
    assert "stopped; quit: status 0" in message
    assert _gone(daemon.pid)
    assert not daemon.root.exists()
    log = (tmp_path / "run" / "mps" / "control.log").read_text()  # kept in the run folder
    assert f"pipe directory {pipe}" in log and "quit" in log


def test_foreign_daemon_reported_and_left_alone(control, tmp_path):
    foreign_pipe = tmp_path / "foreign"
    foreign = _start_foreign(control, foreign_pipe)
    try:
        found = mps_checks.foreign_daemons()
        assert {"pid": foreign, "pipe_dir": str(foreign_pipe)} in [
            {k: d[k] for k in ("pid", "pipe_dir")} for d in found]
        ours = mps.MPSDaemon.start(control)
        assert ours.pid != foreign
        assert foreign not in [d["pid"]
                               for d in mps_checks.foreign_daemons(exclude_pids=(foreign,))]
        ours.quit(grace=2)
        assert psutil.Process(foreign).is_running()
        assert (foreign_pipe / "control").exists()
    finally:
        subprocess.run([control], input="quit\n", text=True, timeout=30,
                       env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(foreign_pipe)})


@pytest.mark.parametrize("handler", ["engine.executors.mp.mps:quit_recorded_daemon",
                                     # as recorded by runners before the package re-layout
                                     "engine.mps:quit_recorded_daemon"])
def test_runner_cleanup_quits_a_recorded_daemon(control, tmp_path, handler):
    daemon = mps.MPSDaemon.start(control)
    cleanup.record(tmp_path, "mps-daemon", handler, **daemon.record_info())
    messages = cleanup.run_recorded(tmp_path)
    assert len(messages) == 1 and "stopped" in messages[0], messages
    assert not list((tmp_path / cleanup.FOLDER).glob("*.json"))
    assert _gone(daemon.pid)
    assert not daemon.root.exists()
    # a second run finds nothing to do
    assert "already gone" in mps.quit_recorded_daemon(daemon.record_info())


def test_cleanup_never_signals_a_process_that_is_not_ours(control, tmp_path):
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        info = {"control": control, "pipe_dir": str(tmp_path / "pipe"), "root": str(tmp_path),
                "pid": bystander.pid, "create_time": psutil.Process(bystander.pid).create_time() - 5}
        message = mps.quit_recorded_daemon(info, grace=0.5)
        assert "already gone" in message and bystander.poll() is None
        assert tmp_path.exists()  # not a fugue-mps- folder: never removed
        shared = {**info, "pipe_dir": mps_checks.DEFAULT_PIPE_DIR}
        assert mps.quit_recorded_daemon(shared).startswith("refused")
    finally:
        bystander.kill()
        bystander.wait()


def test_daemon_that_fails_to_start_leaves_nothing(tmp_path, monkeypatch):
    made = []
    real_root = mps._private_root
    monkeypatch.setattr(mps, "_private_root", lambda: made.append(real_root()) or made[-1])
    broken = tmp_path / "bin" / "nvidia-cuda-mps-control"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'cannot open /dev/nvidiactl' >&2\nexit 4\n")
    broken.chmod(0o755)
    with pytest.raises(mps.MPSError, match="status 4: cannot open /dev/nvidiactl"):
        mps.MPSDaemon.start(str(broken), log_dir=tmp_path / "log")
    assert len(made) == 1 and not made[0].exists()


def test_mps_module_is_runner_safe():
    """The runner imports it to run cleanup records: no torch there."""
    code = ("import sys, engine.executors.mp.mps, engine.cleanup\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'ray')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[5])
    assert out.stdout.strip() == "[]"
