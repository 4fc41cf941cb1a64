"""What ``mp`` promises, kept with ``start = "forkserver"`` (workers forked from the
pre-warmed parent, ``engine.executors.mp.parent``): the MPS environment reaches each worker
before CUDA can initialise; a crashed or SIGKILLed worker fails only its job and its slot
goes to the next; the watchdog sees the parent and the workers as the cell's (its session,
its CPU); a hung cell's stack dumps reach the workers; and nothing survives the cell — the
parent included — when the cell is SIGKILLed (a SIGKILLed runner's cell dies with it, its
parent-death signal: tests/e2e/test_runner_sigkill_leftovers.py).

The hardware boundary is faked as in tests/unit/engine/executors/mp/test_mp_executor.py (a stand-in MPS control
binary, a fake NVML); everything else is real: the stdlib fork server, forked workers,
signals. Each test starts one parent (an import of torch: seconds)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from engine.errors import FugueError
from engine.executors.mp.executor import MPExecutor
from engine.executors.mp.parent import PrewarmedParent
from engine.runner.cellproc import dump_stacks
from engine.runner.watchdog import session_processes, tree_cpu_seconds
from engine.stacks import STACKS_ENV
from tests.unit.engine.executors.mp.test_mp_executor import (  # noqa: F401
    _ctx,
    _gone,
    _job,
    gpu_boundary,
)

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[4]
REPO = TESTS.parent
PLUGIN_DIRS = (TESTS / "fixtures" / "plugins", TESTS / "fixtures" / "mps")
PLUGINS = "fugue_test_plugin,fugue_mps_probe,fugue_window_probe"


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    for folder in PLUGIN_DIRS:
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("FUGUE_PLUGINS", PLUGINS)
    monkeypatch.setenv("FUGUE_PROBE_DIR", str(tmp_path / "probe"))
    monkeypatch.setenv("FUGUE_WINDOW_DIR", str(tmp_path / "window"))
    return tmp_path / "probe", tmp_path / "window"


def _kill_when_blocked(probe: Path) -> threading.Thread:
    def kill() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            marks = list(probe.glob("blocked-*")) if probe.exists() else []
            if marks:
                os.kill(int(marks[0].name.split("-")[1]), signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_forked_workers_keep_mps_env_and_fail_alone(tmp_path, plugins, gpu_boundary):  # noqa: F811
    """One slot, mps = "on" (our stand-in daemon): job 0 blocks mid-training and is
    SIGKILLed, job 1 crashes (os._exit(7)), job 2 trains. Each failure fails its own job
    only, the slot goes to the next job each time, every worker is a fork of the one
    parent, and the one that trained had the daemon's pipe directory in its C environment
    (what the CUDA driver reads) while CUDA was still uninitialised."""
    probe, window = plugins
    from fugue_window_probe import records

    jobs = [_job(0, "mark_and_block"), _job(1, "hard_exit"), _job(2, "window_probe")]
    events: list = []
    _kill_when_blocked(probe)
    ctx = _ctx(tmp_path, events, max_parallel=1, mps="on", start="forkserver")
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    parent = executor.parent.pid
    pipe_dir = str(executor.daemon.pipe_dir)
    assert psutil.Process(parent).ppid() == os.getpid()
    try:
        results = executor.run(jobs, ctx)
    finally:
        executor.teardown(ctx)
    killed = int(next(probe.glob("blocked-*")).name.split("-")[1])
    assert [r.status for r in results] == ["failed", "failed", "ok"]
    assert results[0].error == f"worker process {killed} was killed by SIGKILL before reporting a result"
    assert results[1].error.startswith(f"worker process {results[1].worker_pid} exited with status 7")
    order = [(k, f["job_id"]) for k, f in events if k in ("job_started", "job_done")]
    assert order == [(k, f"J{i}") for i in range(3) for k in ("job_started", "job_done")]
    build, = [r for r in records(window) if r["what"] == "build"]
    assert build["pid"] == results[2].worker_pid and build["ppid"] == parent
    assert build["mps_pipe"] == pipe_dir and build["cuda_initialized"] is False
    preload = ctx.group["executor_info"]["parent"]["preload"]
    # the driver asked after each import step (a CPU host: never mapped; a CUDA build of
    # torch may map it, never initialise it) and the NVML-based check gone before any fork
    assert list(preload["cuda_driver_steps"]) == ["torch", "torch._dynamo", "engine", "plugins"]
    assert set(preload["cuda_driver_steps"].values()) | {preload["cuda_driver"]} <= {
        "absent", "loaded"}
    assert preload["nvml_check_env"] == os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    info = ctx.group["executor_info"]
    assert ctx.group["mps_used"] is True and ctx.group["mp_start"] == "forkserver"
    assert info["parent"]["stop"] == "exit status 0" and _gone(parent)
    assert results[2].worker_start_s is not None and results[0].worker_start_s is not None
    assert results[1].worker_start_s is not None  # it was ready, then crashed in its forward
    assert all(_gone(r.worker_pid) for r in results)
    assert "stopped" in info["mps_quit"]


CELL = textwrap.dedent("""
    import json, sys, torch
    from engine.executors.base import CellContext
    from engine.executors.mp.executor import MPExecutor
    from engine.train.loop import TrainSettings
    from engine.define.workloads import JobSpec

    def job(i, model, **kw):
        return JobSpec(job_id=f"J{i}", exp_id="X", index=i, seed=42 + i, model=model,
                       dataset="wine", task=None, batch_size=16, epochs=1, lr=0.01,
                       optimizer="sgd", **kw)

    jobs = [job(0, "busy_silent", model_kwargs={"busy_s": 0.5}), job(1, "mark_and_block")]
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda kind, **f: None, threads=1, max_parallel=1,
                      options={"start": "forkserver", "mps": "off"})
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    print(json.dumps({"parent": executor.parent.pid}), flush=True)
    executor.run(jobs, ctx)
""")


def test_the_cell_owns_the_parent_and_its_workers(tmp_path, plugins):
    """A cell (its own session, as the runner starts it) whose second job blocks: the
    watchdog's view of the session holds the parent and the worker, and the CPU of the
    first, finished worker (reaped by the parent) stays in the tree's account; the stack
    dump reaches the forked worker; a SIGKILL of the cell takes the parent and the worker
    with it."""
    probe, _ = plugins
    stacks = tmp_path / "attempt" / "stacks"
    stacks.mkdir(parents=True)
    env = {**os.environ, STACKS_ENV: str(stacks),
           "PYTHONPATH": os.pathsep.join([*map(str, PLUGIN_DIRS), str(REPO)])}
    log = open(tmp_path / "cell.log", "w")  # noqa: SIM115 - closed below
    cell = subprocess.Popen([sys.executable, "-c", CELL], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        first = cell.stdout.readline()
        assert first, (tmp_path / "cell.log").read_text()[-3000:]
        parent = json.loads(first)["parent"]
        deadline = time.monotonic() + 300
        while not (probe.exists() and list(probe.glob("blocked-*"))):
            assert cell.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        worker = int(next(probe.glob("blocked-*")).name.split("-")[1])
        assert psutil.Process(worker).ppid() == parent
        procs = session_processes(cell.pid, cell.pid)
        assert {parent, worker} <= {p.pid for p in procs}
        reaped = psutil.Process(parent).cpu_times()
        # the busy first job: its worker reaped by the parent, or (issue 50) still alive,
        # holding its weights for the hand-back after the window — in the session either way
        held = [c for c in psutil.Process(parent).children() if c.pid != worker]
        assert {c.pid for c in held} <= {p.pid for p in procs}
        busy = sum(sum(c.cpu_times()[:2]) for c in held)
        assert reaped.children_user + reaped.children_system + busy > 0.05
        total, _ = tree_cpu_seconds(procs)
        assert total >= reaped.children_user + reaped.children_system
        line = dump_stacks(tmp_path / "attempt", cell.pid)
        dump = (stacks / f"mp-worker-{worker}.txt").read_text()
        assert f"mp-worker-{worker}.txt" in line and "in forward" in dump, line
        assert f"mp-parent-{parent}.txt" in line and f"pid {parent} (" not in line
        cell.send_signal(signal.SIGKILL)
        cell.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not (_gone(parent) and _gone(worker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(parent) and _gone(worker)
    finally:  # whatever a failure left of the cell's session
        for proc in session_processes(cell.pid, cell.pid):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        cell.wait()
        log.close()


def test_a_parent_whose_imports_fail_is_refused_and_leaves_nothing(tmp_path, monkeypatch,
                                                                   gpu_boundary):  # noqa: F811
    """A plugin that cannot be imported in the parent fails setup with one line naming it;
    the parent and the MPS daemon started before it are gone (teardown never runs after a
    failed setup)."""
    for folder in PLUGIN_DIRS:
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_broken_plugin")
    ctx = _ctx(tmp_path, [], mps="on", start="forkserver")
    executor = MPExecutor()
    with pytest.raises(FugueError) as err:
        executor.setup([_job(0)], ctx)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        '[options.mp] start = "forkserver": the pre-warmed parent (pid ')
    assert "failed to import: ConfigError: FUGUE_PLUGINS: cannot import plugin " \
           "'fugue_broken_plugin': RuntimeError: deliberately broken plugin" in message
    assert _gone(executor.parent.pid) and executor.parent.exit == "exit status 0"
    assert executor.daemon is None and "stopped" in executor.info["mps_quit"]
    assert not list((tmp_path / "attempt-1" / "cleanup").glob("*.json"))


@pytest.mark.parametrize("facts, needle", [
    ({"torch": True, "preload": {"error": "ImportError: x"}}, "failed to import: ImportError: x"),
    ({"torch": False, "preload": None}, "did not import torch"),
    ({"torch": True, "preload": {"cuda_initialized": True}}, "initialised CUDA"),
    ({"torch": True, "preload": {}, "bad_fork": True}, "initialised CUDA"),
    ({"torch": True, "preload": {}, "parent_cuda_driver": True},
     "loaded the CUDA driver while importing (its state: unknown)"),
    ({"torch": True, "parent_cuda_driver": True,
      "preload": {"cuda_driver": "unknown: no /proc", "cuda_driver_steps": {}}},
     "(its state: unknown: no /proc)"),
    ({"torch": True, "parent_cuda_driver": True,
      "preload": {"cuda_driver": "initialised",
                  "cuda_driver_steps": {"torch": "loaded", "torch._dynamo": "initialised",
                                        "engine": "initialised"}}},
     "initialised the CUDA driver while importing torch._dynamo (a call such as"),
])
def test_a_parent_that_would_fork_broken_workers_is_refused(facts, needle):
    """What the probe found decides (torch's own bad-fork flag misses a driver that a bare
    CUDA runtime call loaded: the mapped libcuda is checked too)."""
    parent = PrewarmedParent()
    parent.pid = 4242
    with pytest.raises(FugueError) as err:
        parent._check(facts)
    assert needle in str(err.value) and "pid 4242" in str(err.value)
    assert "\n" not in str(err.value)
    parent._check({"torch": True, "preload": {"cuda_initialized": False}, "bad_fork": False,
                   "parent_cuda_driver": False})  # a good parent passes
    # a CUDA build's import maps libcuda without initialising it (seen with torch 2.11 on
    # an H200): the driver said "not initialised", so forked workers can use the GPU
    parent._check({"torch": True, "preload": {"cuda_initialized": False,
                                              "cuda_driver": "loaded"},
                   "bad_fork": False, "parent_cuda_driver": True})


def test_a_parent_that_cannot_start_is_one_line(tmp_path, monkeypatch):
    """Its socket lives in the temporary folder; a path beyond the AF_UNIX limit (a long
    TMPDIR) fails setup with one line, not a traceback."""
    import multiprocessing.util

    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr(multiprocessing.util, "get_temp_dir", lambda: str(deep))
    with pytest.raises(FugueError, match=r'start = "forkserver": the pre-warmed parent could '
                                         r"not start: .*"):
        PrewarmedParent().start()
