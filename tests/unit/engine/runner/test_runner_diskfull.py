"""A disk that fills *during* a cell, and the next attempt's start on it.

- The monitor's samples file that cannot be written fails the cell (status failed, the
  samples file and the reason named) instead of an ok row whose monitor columns were
  computed from a silently cut file, so ``--resume`` measures it again; sample events that
  cannot be written are dropped without stopping the sampler.
- An event that cannot be written whole leaves no torn line in ``events.jsonl``.
- The runner names the file whose write failed (``cell.pid``, not the ``cell.log`` it was
  opened beside) and an attempt that could not start leaves no empty ``cell.pid`` or
  ``spec.json``.

A write that fails is real where it can be: ``RLIMIT_FSIZE`` in a child makes the kernel
do a short write and then fail with ``EFBIG`` (an output errno like ``ENOSPC``); where only
``ENOSPC`` itself will do, ``Path.write_text`` creates the file and then raises it, as a
full disk does.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.errors import OutputError
from engine.events import read_events
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
from engine.results.read import read_rows
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]
NOSPACE = os.strerror(errno.ENOSPC)
TOO_LARGE = os.strerror(errno.EFBIG)

#: Run in a child: cap the size of every file it writes to ``limit`` bytes.
CAP = """
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by SIGXFSZ
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
"""


# --------------------------------------------------------------------------- events

EVENTS_CHILD = CAP + """
import json, resource, sys
from engine.events import EventWriter
writer = EventWriter(sys.argv[1], cell="k", attempt=1)
writer.emit("started", pid=1, exp_id="x", executor="seq", jobs=[])  # fits
try:
    writer.emit("phase", phase="setup", seconds=1.0, pad="x" * 400)  # a short write, then EFBIG
except OSError as exc:
    print(exc.errno, flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
writer.emit("phase", phase="teardown", seconds=2.0)  # room again: one whole line
writer.close()
"""


def test_an_event_that_cannot_be_written_whole_leaves_no_torn_line(tmp_path):
    path = tmp_path / "events.jsonl"
    proc = subprocess.run([sys.executable, "-c", EVENTS_CHILD.format(limit=300), str(path)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(errno.EFBIG)]
    lines = path.read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["started", "phase"], lines
    assert json.loads(lines[1])["phase"] == "teardown"


# --------------------------------------------------------------------------- the monitor

def _sidecar(tmp_path: Path, limit: int, status: int | None = None) -> subprocess.Popen:
    """The real sidecar, every file it writes capped at ``limit`` bytes."""
    argv = ["-m", "engine.measure.monitor", "--root-pid", str(os.getpid()),
            "--parent-pid", str(os.getpid()), "--interval", "0.05",
            "--samples", str(tmp_path / "samples" / "g.csv"),
            "--events", str(tmp_path / "events.jsonl"), "--meta", str(tmp_path / "m.json")]
    if status is not None:
        argv += ["--status-fd", str(status)]
    code = CAP.format(limit=limit) + "import runpy; runpy.run_module('engine.measure.monitor', run_name='__main__')\n"
    return subprocess.Popen([sys.executable, "-c", code, *argv[2:]],
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            pass_fds=() if status is None else (status,))


def test_a_samples_file_that_fills_up_stops_the_sidecar_with_its_one_line(tmp_path):
    # events.jsonl already holds more than the cap: every sample event fails (dropped),
    # the samples file takes a few samples, then fails (the sidecar's reason)
    (tmp_path / "events.jsonl").write_text("x" * 3000 + "\n")
    read, write = os.pipe()
    proc = _sidecar(tmp_path, limit=1500, status=write)
    os.close(write)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    with os.fdopen(read) as status:
        said = status.read()
    partial = tmp_path / "samples" / "g.csv.partial"
    assert proc.returncode == 4, err
    assert said == f"{partial}: {TOO_LARGE}\n"
    assert "Traceback" not in err
    assert partial.exists() and not (tmp_path / "samples" / "g.csv").exists()


CELL_MONITOR_CHILD = """
import sys, time
from engine.cell.sidecar import CellMonitor
from engine.errors import OutputError
monitor = CellMonitor(sys.argv[1], "g", sys.argv[1] + "/events.jsonl", "k", 1, None, 0.05)
assert monitor.start(), monitor.problem
deadline = time.monotonic() + 30
while monitor.proc.poll() is None and time.monotonic() < deadline:
    time.sleep(0.05)
monitor.stop()
try:
    monitor.check_complete()
except OutputError as exc:
    print("lost:", exc)
"""


def test_the_cell_learns_why_its_samples_are_incomplete(tmp_path):
    """CellMonitor passes the sidecar a status pipe; a sidecar that could not write its
    samples makes ``check_complete`` raise the sidecar's line (an OutputError)."""
    code = ("import resource, signal, subprocess\n"
            "real = subprocess.Popen\n"
            "def capped(argv, **kw):\n"
            "    def limit():\n"
            "        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "        resource.setrlimit(resource.RLIMIT_FSIZE, (1500, resource.RLIM_INFINITY))\n"
            "        kw.get('preexec_fn', lambda: None)()\n"
            "    return real(argv, **{**kw, 'preexec_fn': limit})\n"
            "import engine.cell.sidecar as s; s.subprocess.Popen = capped\n") + CELL_MONITOR_CHILD
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    partial = tmp_path / "samples" / "g.csv.partial"
    assert proc.stdout.strip() == f"lost: {partial}: {TOO_LARGE}", proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the runner

CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
passes = 2
device = "cpu"
runs_dir = "{runs}"
"""


@pytest.fixture
def campaign(tmp_path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(runs=tmp_path / "runs"))
    return path


@pytest.fixture
def no_cell(monkeypatch):
    """Cells that would start are stand-ins that exit at once (no torch, no zygote)."""
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")
    started = []
    real = subprocess.Popen

    def popen(argv, **kwargs):
        if argv[1:3] != ["-m", "engine.cell"]:
            return real(argv, **kwargs)
        started.append(argv)
        return real([sys.executable, "-c", "pass"], **kwargs)

    monkeypatch.setattr("engine.runner.cellproc.subprocess.Popen", popen)
    return started


def _fill_up_on(monkeypatch, *names: str) -> None:
    """``Path.write_text`` of a file named ``names`` (or its temporary ``.tmp``) creates
    it and then fails as a full disk does: ENOSPC from the write, no file name."""
    real = Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self.name in names or self.name.removesuffix(".tmp") in names:
            self.touch()
            raise OSError(errno.ENOSPC, NOSPACE)
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_cell_pid_that_cannot_be_written_is_named_and_leaves_nothing(
        tmp_path, campaign, no_cell, monkeypatch):
    _fill_up_on(monkeypatch, "cell.pid")
    with pytest.raises(OutputError) as info:
        Runner(load_campaign(campaign)).run()
    cells = tmp_path / "runs" / "c" / "cells"
    (cell,) = cells.glob("*")
    # the file and why first, then the cell it stopped (issue 43: said in the one line)
    assert str(info.value).startswith(f"{cell / 'attempt-1' / 'cell.pid'}: {NOSPACE} "
                                      "(while cell 1 D_ens seq pass 1 attempt 1 ran; ")
    assert len(no_cell) == 1  # one cell started, stopped at once; the second never
    assert not list(cells.glob("*/attempt-*/cell.pid"))
    assert not list(cells.glob("*/attempt-*/spec.json"))  # the attempt that never ran: gone
    done = read_events(tmp_path / "runs" / "c" / "runner.jsonl")[-1]
    assert done["type"] == "campaign_done" and "cell.pid" in done["error"]


def test_a_spec_that_cannot_be_written_leaves_no_empty_spec(tmp_path, campaign, no_cell,
                                                            monkeypatch):
    _fill_up_on(monkeypatch, "spec.json")
    with pytest.raises(OutputError, match=r"spec\.json: " + NOSPACE):
        Runner(load_campaign(campaign)).run()
    assert no_cell == []
    assert not list((tmp_path / "runs" / "c").glob("cells/*/attempt-*/spec.json"))


# --------------------------------------------------------------------------- a real cell

EXPERIMENTS = """
[experiments.X_quick]
type = "ensemble"
model = "mlp"
dataset = "wine"
k = 1
batch_size = 16
epochs = 3
lr = 0.01
optimizer = "sgd"
"""

#: The monitor sidecar on a disk that fills up: its samples file takes the header and
#: the first sample (the monitor starts), then every write fails with ENOSPC (at the latest
#: the last sample, after the window): the samples file fills up during the cell.
FILLING_SIDECAR = """
import builtins, errno, os, runpy, sys
real_open = builtins.open

class Filling:
    def __init__(self, fh, room):
        self.fh, self.room = fh, room
    def write(self, text):
        if len(text) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(text)
        return self.fh.write(text)
    def __getattr__(self, name):
        return getattr(self.fh, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.fh.close()

def filling_open(path, *args, **kwargs):
    fh = real_open(path, *args, **kwargs)
    return Filling(fh, 300) if str(path).endswith(".csv.partial") else fh

builtins.open = filling_open
sys.argv = ["engine.measure.monitor", *sys.argv[1:]]
runpy.run_module("engine.measure.monitor", run_name="__main__")
"""

#: The real cell, whose monitor is that sidecar.
FILLING_CELL = f"""
import runpy, subprocess, sys
real = subprocess.Popen
def filling(argv, **kw):
    if argv[1:3] == ["-m", "engine.measure.monitor"]:
        argv = [argv[0], "-c", {FILLING_SIDECAR!r}, *argv[3:]]
    return real(argv, **kw)
import engine.cell.sidecar as s
s.subprocess.Popen = filling
sys.argv = ["engine.cell", *sys.argv[1:]]
runpy.run_module("engine.cell", run_name="__main__")
"""


@pytest.mark.slow
def test_a_disk_filling_during_a_cell_fails_that_cell_and_stops_the_campaign(
        tmp_path, monkeypatch):
    (tmp_path / "x.toml").write_text(EXPERIMENTS)
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["X_quick"]\nexecutors = ["seq"]\n'
                        f'passes = 2\ndevice = "cpu"\nthreads = 1\nmonitor_interval_s = 0.05\n'
                        f'runs_dir = "{tmp_path / "runs"}"\n'
                        f'experiments_file = "{tmp_path / "x.toml"}"\n')
    real_popen = subprocess.Popen

    def popen(argv, **kwargs):
        if argv[1:3] == ["-m", "engine.cell"]:
            argv = [argv[0], "-c", FILLING_CELL, *argv[3:]]
        return real_popen(argv, **kwargs)

    monkeypatch.setattr("engine.runner.cellproc.subprocess.Popen", popen)
    with pytest.raises(OutputError) as info:
        Runner(load_campaign(campaign)).run()
    samples = list((tmp_path / "runs" / "samples").glob("*.csv.partial"))
    assert len(samples) == 1  # what the monitor could write: kept, named as partial
    line = f"{samples[0]}: {NOSPACE}"
    assert str(info.value).startswith(line), info.value
    rows = read_rows(tmp_path / "runs" / GROUPS_FILE)
    assert [(r["status"], r["error"]) for r in rows] == [("failed", line)]  # pass 2 never ran
    assert not (tmp_path / "runs" / INDIVIDUAL_FILE).exists()  # no job row claims a measure
