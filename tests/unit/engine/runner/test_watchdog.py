"""The watchdog's rule on real processes: idle and stopped trees strike, busy ones and
progress events reset, the grandchildren of a session count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from engine.runner.watchdog import Watchdog, WatchdogSettings, session_processes

FAST = WatchdogSettings(interval_s=0.2, suspect_after=2, hung_after=3)


def _spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _checks(dog: Watchdog, n: int, progress: bool = False):
    out = []
    for _ in range(n):
        time.sleep(dog.settings.interval_s)
        if progress:
            dog.progress()
        out.append(dog.check())
    return out


@pytest.fixture
def procs():
    started = []
    yield started
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def test_idle_process_goes_suspect_then_hung(procs):
    procs.append(proc := _spawn("import time; time.sleep(60)"))
    time.sleep(0.5)  # past interpreter start-up
    dog = Watchdog(FAST, proc.pid, proc.pid)
    states = [c.state for c in _checks(dog, 5)]
    assert states[0] == "ok"  # the first check has no CPU baseline yet
    assert "suspect" in states and states[-1] == "hung"


def test_busy_process_without_events_is_never_hung(procs):
    procs.append(proc := _spawn("while True: pass"))
    dog = Watchdog(FAST, proc.pid, proc.pid)
    checks = _checks(dog, 6)
    assert all(c.state == "ok" for c in checks)
    assert checks[-1].cpu_core_fraction > FAST.cpu_fraction


def test_progress_events_reset_the_count(procs):
    procs.append(proc := _spawn("import time; time.sleep(60)"))
    dog = Watchdog(FAST, proc.pid, proc.pid)
    assert all(c.state == "ok" and c.strikes == 0 for c in _checks(dog, 5, progress=True))


def test_busy_device_counts_as_work(procs):
    procs.append(proc := _spawn("import time; time.sleep(60)"))
    dog = Watchdog(FAST, proc.pid, proc.pid, device_util=lambda: 80.0)
    assert all(c.state == "ok" for c in _checks(dog, 5))


def test_stopped_process_is_reported(procs):
    procs.append(proc := _spawn("while True: pass"))
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGSTOP)  # what reading the terminal from the background does
    dog = Watchdog(FAST, proc.pid, proc.pid)
    checks = _checks(dog, 4)
    assert checks[-1].state in ("suspect", "hung")
    assert f"pid {proc.pid} stopped" in checks[-1].describe()


def test_grandchild_in_the_session_is_found_after_its_parent_exits(procs):
    # the middle process starts a grandchild and exits: the grandchild is re-parented to init
    # but stays in the session, and must still be watched and killed with it
    procs.append(proc := _spawn(
        "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True)"))
    proc.wait()
    found = [p.pid for p in session_processes(proc.pid, proc.pid)]
    assert len(found) == 1 and found[0] != proc.pid
    os.kill(found[0], signal.SIGKILL)
