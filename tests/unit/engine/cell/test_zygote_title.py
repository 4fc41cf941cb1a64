"""A zygote-forked cell's title (``ps``, ``/proc/PID/cmdline``) is written by the
``setproctitle`` package (issue 49), not through ``/proc/self/mem``: the title says
``python -m engine.cell SPEC`` as a spawned cell's command line does, the thread name and
the environment strings stay as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cell.protocol import TITLE_ROOM

REPO = Path(__file__).resolve().parents[4]

# forked as the zygote forks a cell; setproctitle wrapped to record that it did the work
PROBE = r"""
import json, os, sys
import setproctitle
calls = []
real = setproctitle.setproctitle
setproctitle.setproctitle = lambda title: (calls.append(title), real(title))[1]
opened = []
import builtins
real_open = builtins.open
builtins.open = lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1]
from engine.cell import zygote
comm = real_open("/proc/self/comm").read().strip()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    zygote._retitle([sys.executable, "-m", "engine.cell", "/runs/c/spec.json"])
    out = {"calls": calls, "opened": opened,
           "cmdline": real_open("/proc/self/cmdline", "rb").read().decode(errors="replace"),
           "comm": real_open("/proc/self/comm").read().strip(), "comm_before": comm,
           "environ": "PROBE_MARK=kept" in real_open("/proc/self/environ", "rb").read().decode(
               errors="replace"), "spt_noenv": os.environ.get("SPT_NOENV")}
    os.write(write, json.dumps(out).encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print(os.read(read, 1 << 20).decode())
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="Linux /proc only")
def test_the_cell_title_is_set_with_setproctitle(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROBE_MARK": "kept"}
    env.pop("SPT_NOENV", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, "--zygote", " " * TITLE_ROOM],
                          env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    title = f"{sys.executable} -m engine.cell /runs/c/spec.json"
    assert out["calls"] == [title]
    assert not any("/proc/self/mem" in f for f in out["opened"])
    # ps (NULs shown as spaces) and psutil's joined words show the title alone
    assert out["cmdline"].replace("\0", " ").split() == title.split()
    assert out["comm"] == out["comm_before"]  # the interpreter's name, as a spawned cell
    assert out["environ"] and out["spt_noenv"] is None
