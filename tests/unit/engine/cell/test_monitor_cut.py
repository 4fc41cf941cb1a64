"""A monitor sidecar that dies before the group window ends (a crash, an OOM kill — not a
full disk, which fails the cell) must not leave columns computed from a cut window, nor a
``samples_file`` naming a file that does not exist (issue 18)."""

from __future__ import annotations

import os
import signal
import time

from engine.cell.sidecar import CellMonitor


def test_a_sidecar_killed_mid_window_leaves_its_columns_empty_and_says_why(tmp_path):
    monitor = CellMonitor(tmp_path, "g_cut", tmp_path / "events.jsonl", "c", 1, None, 0.05)
    assert monitor.start(), monitor.problem
    t0 = time.monotonic()
    time.sleep(0.3)
    os.kill(monitor.proc.pid, signal.SIGKILL)
    monitor.proc.wait()
    time.sleep(0.2)
    t1 = time.monotonic()
    monitor.stop()
    monitor.check_complete()  # not a full disk: the cell itself is not failed
    cols = monitor.group_columns(t0, t1)
    assert "monitor exited with status -9 before the group window ended" in \
        cols["gpu_metrics_missing"]
    assert cols["energy_method"] == "none" and cols.get("cpu_util_mean") is None
    assert cols["samples_file"] == os.path.join("samples", "g_cut.csv.partial")
    assert (tmp_path / cols["samples_file"]).is_file()
    assert monitor.job_columns("j0", t0, t1, shared=False) == {"energy_method": "none"}
