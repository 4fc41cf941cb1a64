"""How a runner starts its cells: the choice (``FUGUE_CELL_START``), the zygote's own checks
before each fork (one thread, no CUDA context), and the fall-back to fresh interpreters when
the zygote cannot start. No torch here: a zygote whose imports fail is a stand-in ``torch``
package that raises, and cells are stand-ins (the real ones: tests/e2e/test_zygote.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import engine.runner.attempt as attempt_mod
from engine.define.campaign import load_campaign
from engine.errors import ConfigError
from engine.events import read_events
from engine.results.columns import GROUPS_FILE
from engine.results.read import read_rows
from engine.runner.cellproc import cell_env
from engine.runner.supervisor import Runner
from engine.runner.zygote import Zygote, ZygoteError, start_method

REPO = Path(__file__).resolve().parents[4]


def test_the_start_method_comes_from_fugue_cell_start():
    assert start_method({}) == "zygote" and start_method({"FUGUE_CELL_START": ""}) == "zygote"
    assert start_method({}, platform="darwin") == "spawn"  # no child subreaper there
    assert start_method({"FUGUE_CELL_START": "spawn"}) == "spawn"
    with pytest.raises(ConfigError, match=r"FUGUE_CELL_START: unknown cell start 'fork' "
                                          r"\(choose zygote or spawn\)"):
        start_method({"FUGUE_CELL_START": "fork"})


#: fork_problem() in a bare interpreter, then with a thread running, then with a torch
#: whose CUDA is initialised: the zygote's checks before every fork.
CHECKS = r"""
import sys, threading, types
from engine.cell.zygote import fork_problem
print(repr(fork_problem()))
stop = threading.Event()
worker = threading.Thread(target=stop.wait, name="holder")
worker.start()
print(repr(fork_problem()))
stop.set(); worker.join()
import time
from engine.cell.zygote import os_threads
while len(os_threads()) > 1:  # the joined thread's kernel task may linger a moment
    time.sleep(0.001)
fake = types.ModuleType("torch")
fake.cuda = types.SimpleNamespace(is_initialized=lambda: True)
sys.modules["torch"] = fake
print(repr(fork_problem()))
"""


def test_the_zygote_refuses_to_fork_with_a_thread_or_a_cuda_context():
    out = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60,
                         check=True)
    bare, threaded, cuda = (eval(line) for line in out.stdout.splitlines())
    assert bare == "", out.stderr
    assert threaded.startswith("the zygote runs 2 threads (") and "Python threads: 2" in threaded
    assert cuda == "the zygote initialised CUDA: a CUDA context does not survive a fork"


@pytest.fixture
def broken_torch(tmp_path, monkeypatch) -> Path:
    """A ``torch`` first on the path that cannot be imported: every zygote fails its
    imports (the cells here are stand-ins that do not import it)."""
    fake = tmp_path / "fake-torch"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    return fake


def test_a_zygote_that_cannot_import_says_why_and_is_gone(tmp_path, broken_torch):
    zygote = Zygote.start(tmp_path, cell_env(tmp_path / "scratch", 1))
    with pytest.raises(ZygoteError) as info:
        zygote.wait_ready(timeout=60)
    assert str(info.value) == ("the zygote could not import what cells use: ImportError: "
                               "libtorch_cpu.so: cannot open shared object file")
    assert zygote.broken == str(info.value)
    assert zygote.proc.poll() == 1  # it exited (and was reaped)
    assert "Traceback" in (tmp_path / "zygote.log").read_text()
    with pytest.raises(ZygoteError, match="could not import"):  # no second try
        zygote.fork(["spec.json"], 1, {})


CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
passes = 2
device = "cpu"
runs_dir = "{runs}"
"""


def test_cells_start_the_old_way_when_the_zygote_cannot_start(tmp_path, broken_torch,
                                                             monkeypatch):
    calls = []

    def start_cell(spec_path, log_path, env, **kwargs):  # a cell that dies without a row
        calls.append(kwargs)
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"],
                                start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    monkeypatch.delenv("FUGUE_CELL_START", raising=False)
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(runs=tmp_path / "runs"))
    assert Runner(load_campaign(path)).run().exit_code == 1
    assert calls == [{}, {}]  # both cells without a zygote
    events = read_events(tmp_path / "runs" / "c" / "runner.jsonl")
    (lost,) = [e for e in events if e["type"] == "zygote"]
    assert "ImportError: libtorch_cpu.so" in lost["error"]
    (warning,) = [e for e in events if e["type"] == "warning"]
    assert warning["message"] == f"cells start as fresh interpreters from now on: {lost['error']}"
    assert [e["start"] for e in events if e["type"] == "cell_started"] == ["spawn", "spawn"]
    rows = read_rows(tmp_path / "runs" / GROUPS_FILE)  # written by the runner: they say so too
    assert [(r["status"], r["cell_start"]) for r in rows] == [("failed", "spawn")] * 2
    assert (tmp_path / "runs" / "c" / "zygote.log").exists()


def test_a_forked_process_that_is_not_the_runners_child_is_refused():
    """The zygote's reply names a process the runner did not adopt (no subreaper took it,
    say): no cell may run that the runner cannot wait for; it is killed and refused."""
    from engine.runner.zygote import _not_adopted

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                start_new_session=True)
    try:
        assert _not_adopted(stranger.pid) == ""  # our child, leading its session: fine
    finally:
        stranger.kill()
        stranger.wait()
    own_group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert "does not lead its own session" in _not_adopted(own_group.pid)
    finally:
        own_group.kill()
        own_group.wait()
    assert "its parent is pid" in _not_adopted(1)  # init: never this runner's child
