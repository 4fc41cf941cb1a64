"""Issue 48 item 1 in a real terminal: tmux starts ``fugue-tui dashboard`` on a one-cell
campaign whose cell trains long (D_reg, 400 epochs), ``P`` opens the process view, which
lists the runner and the cell's process, ``K`` and the cell's pid (read from the runner's
``cell_started`` event) ask to kill it, ``y`` sends the kill through the runner, and the
runner records it (its ``killed`` event names the pid) while the run screen shows the cell
killed. Then quit: exit 0."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TMUX = shutil.which("tmux")
ROOT = Path(__file__).resolve().parents[2]
#: Waits on the screen: generous, for a loaded two-core host.
UI_S = 90.0


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run([TMUX, "-L", socket, *args], capture_output=True, text=True,
                          check=True, env=os.environ).stdout  # not readline's COLUMNS=80


def _wait(socket: str, check, what: str, timeout: float = UI_S) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "dash")
        if (check in screen) if isinstance(check, str) else check(screen):
            return screen
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} on the screen:\n{screen}")


def _runner_events(tmp_path: Path) -> list[dict]:
    found = list(tmp_path.glob("runs/*/runner.jsonl"))
    if not found:
        return []
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the real-terminal check "
                    "needs it (apt-get install tmux)")
def test_the_process_view_kills_a_cell_through_the_runner(tmp_path, data_dir):
    (tmp_path / "experiments.toml").write_text("[experiments.D_reg]\nepochs = 400\n")
    (tmp_path / "procs.toml").write_text(
        'name = "procs"\nexperiments = "D_reg"\nexecutors = ["seq"]\ndevice = "cpu"\n'
        'threads = 1\nexperiments_file = "experiments.toml"\n')
    socket = f"fugue-procs-{os.getpid()}"
    env = {"FUGUE_DATA_DIR": str(data_dir), "FUGUE_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "FUGUE_PLUGINS": "",
           "NO_COLOR": "1"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(tmp_path))} && env {exports} {shlex.quote(sys.executable)} "
               f"-m fugue_tui dashboard procs.toml; echo EXITED $?; sleep 120")
    _tmux(socket, "new-session", "-d", "-s", "dash", "-x", "150", "-y", "45", command)
    _tmux(socket, "set", "-s", "escape-time", "500")
    try:
        _wait(socket, "1 cells: 1 run, 0 skipped", "the plan's preview")
        _tmux(socket, "send-keys", "-t", "dash", "C-r")
        deadline = time.monotonic() + UI_S
        started = []
        while not started:
            assert time.monotonic() < deadline, "the cell did not start"
            started = [e for e in _runner_events(tmp_path) if e["type"] == "cell_started"]
            time.sleep(0.3)
        pid = int(started[0]["pid"])
        _wait(socket, " running ", "the cell running")
        _tmux(socket, "send-keys", "-t", "dash", "P")
        screen = _wait(socket, lambda s: "processes of procs" in s and f" {pid} " in s
                       and " runner " in s, "the process view with the runner and the cell")
        assert " cell " in screen and "GPU MiB" in screen
        _tmux(socket, "send-keys", "-t", "dash", "K")
        _wait(socket, "Kill the process of pid", "the pid prompt")
        _tmux(socket, "send-keys", "-t", "dash", "-l", str(pid))
        _tmux(socket, "send-keys", "-t", "dash", "Enter")
        _wait(socket, f"Kill pid {pid} (the cell's process)?", "the confirmation")
        _tmux(socket, "send-keys", "-t", "dash", "y")
        deadline = time.monotonic() + UI_S
        killed = []
        while not killed:
            assert time.monotonic() < deadline, "the runner recorded no kill"
            killed = [e for e in _runner_events(tmp_path) if e["type"] == "killed"]
            time.sleep(0.3)
        assert f"killed by control command: pid {pid} (" in killed[0]["reason"], killed
        control = [e for e in _runner_events(tmp_path) if e["type"] == "control"]
        assert control and control[0]["applied"] and f"pid {pid}" in control[0]["reason"]
        _tmux(socket, "send-keys", "-t", "dash", "Escape")
        _wait(socket, lambda s: " killed " in s and "D_reg" in s, "the cell shown killed")
        _tmux(socket, "send-keys", "-t", "dash", "q")
        _wait(socket, "EXITED 0", "the dashboard's exit", timeout=60)
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True)
