"""Nothing of a campaign outlives its runner by more than 5 seconds, even when the runner is
killed with SIGKILL in the middle of a Ray cell: not the cell, not its monitor, not the Ray
runtime's processes (its agents re-parent to init in sessions of their own), not its
``/tmp/fr-*`` folder, not the cell's ``/tmp/fugue-cell-*`` scratch folder. Checked with
``ps``, as a user would. One test, the smallest Ray cell (one job that blocks in its first
forward pass, so the runtime is surely up when the runner dies)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from engine.events import read_events
from engine.executors.ray.runtime import TAG_ENV
from tests.e2e.conftest import X_BLOCK, campaign_text, start, write_campaign

pytestmark = pytest.mark.slow

#: The watchdog only flags: the blocked job must still be running when the runner dies.
WATCHDOG = """
[watchdog]
interval_s = 5.0
action = "flag"
"""


def _running(pids: set[int]) -> dict[int, str]:
    """Of ``pids``, those ``ps`` lists as running (not zombies), with their command."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        pid, stat, *args = line.split(None, 2)
        if int(pid) in pids and not stat.startswith("Z"):
            found[int(pid)] = " ".join(args)[:150]
    return found


def _tagged(tag: str) -> set[int]:
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TAG_ENV) == tag:
                found.add(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_runner_killed_during_a_ray_cell_leaves_nothing_after_5_s(tmp_path):
    write_campaign(tmp_path, campaign_text("ray-kill", "X_block", ["ray"]) + WATCHDOG, X_BLOCK)
    runner = start(tmp_path, "campaign.toml", module="engine.runner")
    cells = tmp_path / "runs" / "ray-kill" / "cells"
    executor = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and runner.poll() is None and executor is None:
            for events in cells.glob("*/attempt-1/events.jsonl") if cells.exists() else []:
                seen = read_events(events)
                if any(e["type"] == "job_started" for e in seen):
                    executor = next(e for e in seen if e["type"] == "executor")
                    cell_pid = next(e["pid"] for e in seen if e["type"] == "started")
            time.sleep(0.5)
        assert executor is not None, "the ray cell never started its job"
        tag, temp_dir = executor["tag"], Path(executor["temp_dir"])
        # Everything of the campaign: the runner's descendants (its guard, the cell, the
        # monitor, Ray's driver-side processes) and every process carrying the tag.
        ours = {p.pid for p in psutil.Process(runner.pid).children(recursive=True)}
        ours |= _tagged(tag)
        assert len(_tagged(tag)) >= 3, "the Ray runtime is not up"
        # the cell's scratch folder, by what the cell was given (its compile caches)
        scratch = [str(Path(psutil.Process(cell_pid).environ()["TORCHINDUCTOR_CACHE_DIR"]).parent)]
        assert Path(scratch[0]).is_dir() and temp_dir.exists()
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        killed = time.monotonic()
        while time.monotonic() < killed + 5.0 and (_running(ours) or _tagged(tag)
                                                   or temp_dir.exists()
                                                   or any(Path(s).exists() for s in scratch)):
            time.sleep(0.2)
        assert _running(ours | _tagged(tag)) == {}, f"left {time.monotonic() - killed:.1f} s after"
        assert not temp_dir.exists(), "Ray's temporary folder stayed"
        assert not any(Path(s).exists() for s in scratch), "the cell's scratch folder stayed"
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.communicate(timeout=30)
