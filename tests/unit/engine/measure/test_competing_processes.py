"""The processes that competed with a cell (issue 30: "the processes that competed when a
cell was warned"): measured from CPU times outside the cell's tree, named in the busy-host
warning and the row, and shown beside the warned cell on the dashboard's timeline."""

from __future__ import annotations

import subprocess
import sys
import time

from engine.cell.rows import load_warnings
from engine.measure.competitors import busiest, describe, snapshot
from fugue_tui.app.models.timeline import Span, legend

SPIN = "import time\nt = time.time()\nwhile time.time() - t < 30: pass\n"


def test_a_busy_process_outside_the_tree_is_named_one_inside_is_not():
    # ``root``: a sleeping process standing for the cell; the spinner outside its tree
    # competes, the spinner under it is the cell's own.
    cell = subprocess.Popen([sys.executable, "-c",
                             "import subprocess, sys, time\n"
                             f"subprocess.Popen([sys.executable, '-c', {SPIN!r}])\n"
                             "time.sleep(30)\n"])
    other = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(1.0)  # both spinners running
        before = snapshot(cell.pid)
        t0 = time.perf_counter()
        time.sleep(1.5)
        found = busiest(before, snapshot(cell.pid), time.perf_counter() - t0, root=cell.pid,
                        n=10, min_pct=5)
        pids = [p["pid"] for p in found]
        assert other.pid in pids, found
        mine = {c.pid for c in __import__("psutil").Process(cell.pid).children()}
        assert mine and not mine & set(pids), (mine, found)
        spinner = next(p for p in found if p["pid"] == other.pid)
        assert 20 <= spinner["cpu_pct"] <= 110, spinner  # one core at most, shared with us
        assert found == sorted(found, key=lambda p: -p["cpu_pct"])
    finally:
        for proc in (other, cell):
            proc.kill()
            proc.wait()
        import psutil

        for child in psutil.process_iter(["cmdline"]):
            if child.info["cmdline"] and SPIN in " ".join(child.info["cmdline"]):
                child.kill()


def test_the_busy_warning_names_the_competitors_and_a_quiet_host_says_nothing():
    who = [{"pid": 42, "name": "python", "cpu_pct": 95.0},
           {"pid": 7, "name": "raylet", "cpu_pct": 12.4}]
    assert describe(who) == "python (pid 42) 95 %, raylet (pid 7) 12 %"
    busy = load_warnings(10.0, 9.0, 1, (9.0, 9.5), competitors=who)
    assert any("the machine was busy; busiest other processes: python (pid 42) 95 %" in w
               for w in busy), busy
    assert load_warnings(10.0, 9.0, 1, (0.1, 0.2), competitors=who) == []


def test_the_timeline_legend_marks_the_warned_cell_and_names_its_competitors():
    warned = ("host load average 9.5 on 2 cores: the machine was busy; busiest other "
              "processes: python (pid 42) 95 %")
    cells = [Span("1", "D_ens seq", 0.0, 5.0), Span("2", "D_ens mp", 5.0, 9.0, warned)]
    lines = legend(cells, 80, 2)
    assert lines[0].startswith("1 D_ens seq 0:00–0:05 · 2! D_ens mp"), lines
    assert lines[1] == "!2 host busy, busiest other processes: python (pid 42) 95 %"
    assert legend(cells, 80, 1) == [lines[0]]  # one line: the mark only
    assert all("!" not in line for line in legend(cells[:1], 80, 2))
