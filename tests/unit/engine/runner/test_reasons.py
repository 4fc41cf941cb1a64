"""The reasons recorded in rows and events say what was measured, never a nearby line or a
guessed cause: a cell killed by a signal is named by the signal (and the monitor's last
sample, and Python's fatal-error line where there is one), not by the last line of its
log; "survived SIGKILL" only for a process that is still running; an exception without
a message is not recorded as ``MemoryError: ``; a cell that used little CPU is told so in
numbers, without a cause nobody measured. Cells here are stand-ins (no torch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import engine.runner.attempt as attempt_mod
from engine.cell.rows import load_warnings
from engine.define.campaign import load_campaign
from engine.errors import failure_line
from engine.events import read_events
from engine.results.columns import GROUPS_FILE
from engine.results.read import read_rows
from engine.runner.cellproc import stop_session
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]

CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
device = "cpu"
runs_dir = "{runs}"
"""

#: A stand-in cell: optionally one monitor sample event, then an unrelated line in its log
#: (Ray's, the monitor's), then death by the signal named in argv[2].
FAKE_CELL = r"""
import ctypes, faulthandler, json, os, signal, sys, time
from engine.events import EventWriter
spec = json.load(open(sys.argv[1]))
events = EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"])
if sys.argv[3] == "sample":
    events.emit("sample", t=time.monotonic(), time=time.time(), rss_mib=2048.5,
                host_mem_available_mib=97.0, cpu_pct=100.0)
if sys.argv[3] == "series":  # growing to 1194 MiB, then the sample taken as it died
    for i, (rss, free) in enumerate([(300.0, 3000.0), (800.0, 900.0), (1194.2, 80.0),
                                     (650.0, 500.0), (17.0, 2900.0)]):
        events.emit("sample", t=time.monotonic(), time=time.time() - 2.0 + 0.5 * i,
                    rss_mib=rss, host_mem_available_mib=free, cpu_pct=100.0)
print("2026-01-01 12:00:00,000 INFO worker.py:1 -- Token authentication is enabled for "
      "the cluster", flush=True)
print("warning: monitor: NVML temperature read failed once", flush=True)
if sys.argv[2] == "SIGSEGV":
    faulthandler.enable()  # as engine.cell.main does
    ctypes.string_at(0)
os.kill(os.getpid(), getattr(signal, sys.argv[2]))
time.sleep(30)
"""


@pytest.fixture
def dying_cell(monkeypatch, tmp_path):
    """A campaign of one cell whose process dies by ``how["signal"]``."""
    how = {"signal": "SIGKILL", "sample": ""}
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            return subprocess.Popen([sys.executable, "-c", FAKE_CELL, str(spec_path),
                                     how["signal"], how["sample"]], stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(runs=tmp_path / "runs"))
    return path, how


def _only_row(tmp_path: Path) -> dict:
    (row,) = read_rows(tmp_path / "runs" / GROUPS_FILE)
    return row


def test_a_cell_killed_by_sigkill_is_named_by_the_signal_not_by_a_ray_log_line(
        tmp_path, dying_cell):
    path, _ = dying_cell
    assert Runner(load_campaign(path)).run().exit_code == 1
    row = _only_row(tmp_path)
    assert row["status"] == "failed"
    assert row["error"].startswith("cell killed by signal 9 (SIGKILL), not sent by the runner")
    assert "Token" not in row["error"] and "monitor" not in row["error"], row["error"]


def test_a_signal_reason_quotes_the_monitors_last_sample(tmp_path, dying_cell):
    path, how = dying_cell
    how["sample"] = "sample"
    Runner(load_campaign(path)).run()
    error = _only_row(tmp_path)["error"]
    assert "last monitor sample" in error and "cell RSS 2048 MiB" in error, error
    assert "host memory available 97 MiB" in error, error


def test_a_cell_killed_for_memory_reports_its_peak_not_only_the_sample_as_it_died(
        tmp_path, dying_cell):
    """Issue 46: the monitor's last sample is taken as the OOM killer's victim dies (17
    MiB); the peak before it (1194 MiB) is what the kill was about."""
    path, how = dying_cell
    how["sample"] = "series"
    Runner(load_campaign(path)).run()
    error = _only_row(tmp_path)["error"]
    assert error.startswith("cell killed by signal 9 (SIGKILL), not sent by the runner; "
                            "peak cell RSS 1194 MiB "), error
    assert "lowest host memory available 80 MiB" in error, error
    # the last sample is kept, labelled as such, after the peak
    last = error.index("; last monitor sample ")
    assert "cell RSS 17 MiB, host memory available 2900 MiB" in error[last:], error


def test_the_memory_trail_keeps_the_peak_the_lowest_and_the_last():
    from engine.event_types import MonitorSample
    from engine.runner.reasons import MemoryTrail, sample_facts

    trail = MemoryTrail()
    assert sample_facts(trail) == ""
    trail.add(MonitorSample(t=0.0, time=100.0, rss_mib=None, host_mem_available_mib=None))
    for i, (rss, free) in enumerate([(500.0, 600.0), (1194.0, 70.0), (17.0, 900.0)]):
        trail.add(MonitorSample(t=1.0 + i, time=101.0 + i, rss_mib=rss,
                                host_mem_available_mib=free))
    assert sample_facts(trail, ended=104.0) == (
        "peak cell RSS 1194 MiB 2.0 s before, lowest host memory available 70 MiB 2.0 s "
        "before; last monitor sample 1.0 s before: cell RSS 17 MiB, host memory "
        "available 900 MiB")
    # a peak that is the last sample is said once, as the last sample
    trail.add(MonitorSample(t=9.0, time=109.0, rss_mib=5000.0, host_mem_available_mib=10.0))
    assert sample_facts(trail, ended=109.5) == (
        "last monitor sample 0.5 s before: cell RSS 5000 MiB, host memory available 10 MiB")


def test_a_segfault_is_named_by_pythons_fatal_error_not_by_a_monitor_line(
        tmp_path, dying_cell):
    path, how = dying_cell
    how["signal"] = "SIGSEGV"
    Runner(load_campaign(path)).run()
    error = _only_row(tmp_path)["error"]
    assert error.startswith("cell killed by signal 11 (SIGSEGV)"), error
    assert "Fatal Python error: Segmentation fault" in error and "monitor" not in error, error
    runner_failed = [e for e in read_events(tmp_path / "runs" / "c" / "runner.jsonl")
                     if e["type"] == "failed"]
    assert runner_failed[0]["error"] == error


def test_the_cell_dumps_its_stack_on_a_fatal_signal(tmp_path):
    """engine.cell.main turns Python's fault handler on, so a segfault leaves the line the
    runner quotes (pytest's own fault handler hides this in-process: a subprocess)."""
    from tests.unit.engine.runner.test_cli_leftovers_diskfull import _spec

    spec = _spec(tmp_path)
    code = ("import ctypes, sys, engine.cell.main as m\n"
            "m.run_cell = lambda spec, events: ctypes.string_at(0)\n"
            "sys.exit(m.main([sys.argv[1]]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60,
                          check=False)
    assert proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in proc.stderr, proc.stderr[-2000:]


# --------------------------------------------------------------------- survived SIGKILL

#: A stand-in for a container's init that reaps late: a subreaper that never waits. It
#: starts a session leader, which starts a grandchild ignoring SIGTERM and exits; the
#: grandchild is re-parented to this init, so once SIGKILLed it is a zombie (dead, running
#: nothing) until the init reaps it.
GRANDCHILD = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print(1, flush=True); time.sleep(60)")
LEADER = ("import subprocess, sys\n"
          f"child = subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}], "
          "stdout=subprocess.PIPE)\n"
          "child.stdout.readline()\n"
          "print(child.pid, flush=True)\n")
LATE_INIT = ("import ctypes, subprocess, sys, time\n"
             "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
             f"leader = subprocess.Popen([sys.executable, '-c', {LEADER!r}], "
             "stdout=subprocess.PIPE, text=True, start_new_session=True)\n"
             "grandchild = leader.stdout.readline().strip()\n"
             "print(leader.pid, grandchild, flush=True)\n"
             "time.sleep(60)\n")


def test_a_killed_process_that_is_only_a_zombie_did_not_survive_sigkill():
    init = subprocess.Popen([sys.executable, "-c", LATE_INIT], stdout=subprocess.PIPE,
                            text=True)
    try:
        leader, grandchild = map(int, init.stdout.readline().split())
        deadline = time.monotonic() + 10
        while psutil.Process(leader).status() != psutil.STATUS_ZOMBIE:  # it exits (unreaped)
            assert time.monotonic() < deadline
            time.sleep(0.02)
        # The session holds the grandchild, which ignores SIGTERM: it needs SIGKILL, and
        # then lingers as the late init's zombie. Nothing survived.
        assert stop_session(leader, None, grace=0.5) == [grandchild]
        assert psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
    finally:
        init.kill()
        init.wait(timeout=10)


# --------------------------------------------------------------------- messages

def test_an_exception_without_a_message_is_not_recorded_as_type_colon_nothing():
    line = failure_line(MemoryError())
    assert not line.rstrip().endswith(":") and line.startswith("MemoryError (no message")
    # what was measured when it was recorded, in numbers
    assert "peak RSS" in line and "MiB" in line and "host memory available" in line, line
    assert failure_line(KeyError()) == "KeyError (no message)"
    assert failure_line(ValueError("bad")) == "ValueError: bad"


def test_little_cpu_is_reported_in_numbers_without_a_guessed_cause():
    (line,) = load_warnings(t_group=10.0, cpu_s=1.2, threads=2, loads=(0.1, 0.2))
    assert "competed" not in line and "other processes" not in line, line
    assert "1.2 s of CPU" in line and "10.0 s" in line, line
    # a busy host is a separate, measured warning (the load average)
    busy = load_warnings(t_group=10.0, cpu_s=1.2, threads=2,
                         loads=(os.cpu_count() + 3.0, 0.2))
    assert len(busy) == 2 and "load average" in busy[1]


def test_an_exit_status_without_the_cells_own_line_quotes_the_log_as_a_hint(tmp_path):
    from engine.runner.reasons import exit_reason

    log = tmp_path / "cell.log"
    log.write_text("warning: monitor: NVML temperature read failed once\n")
    assert exit_reason(7, "", log) == ("cell exited with status 7 (last line of its log: "
                                       "warning: monitor: NVML temperature read failed once)")
    assert exit_reason(3, "RuntimeError: boom", log) == "RuntimeError: boom"
    assert exit_reason(7, "", tmp_path / "none.log") == "cell exited with status 7"
