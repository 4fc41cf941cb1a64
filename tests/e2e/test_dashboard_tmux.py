"""The dashboard in a real terminal: tmux starts ``fugue-tui dashboard CAMPAIGN``, keys are
sent, and the captured screen shows the campaign finishing with its numbers."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.results.read import read_rows

pytestmark = pytest.mark.slow

TMUX = shutil.which("tmux")


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run([TMUX, "-L", socket, *args], capture_output=True, text=True,
                          check=True, env=os.environ).stdout  # not readline's COLUMNS=80


def _wait_screen(socket: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "dash")
        if text in screen:
            return screen
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {text!r} on the screen:\n{screen}")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the real-terminal check needs it (apt-get install tmux)")
def test_dashboard_in_tmux_runs_a_campaign_to_the_end(tmp_path, data_dir):
    (tmp_path / "experiments.toml").write_text("[experiments.D_ens]\nepochs = 1\nk = 2\n")
    (tmp_path / "tmux.toml").write_text(
        'name = "tmux"\nexperiments = "D_ens"\nexecutors = ["seq"]\ndevice = "cpu"\n'
        'threads = 1\nexperiments_file = "experiments.toml"\n')
    socket = f"fugue-test-{os.getpid()}"
    env = {"FUGUE_DATA_DIR": str(data_dir), "FUGUE_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TERM": "xterm-256color",
           "FUGUE_PLUGINS": "", "NO_COLOR": "1"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(tmp_path))} && env {exports} {shlex.quote(sys.executable)} "
               f"-m fugue_tui dashboard tmux.toml; echo EXITED $?; sleep 60")
    _tmux(socket, "new-session", "-d", "-s", "dash", "-x", "150", "-y", "45", command)
    try:
        _wait_screen(socket, "1 cells: 1 run, 0 skipped", timeout=60)  # the plan's preview
        _tmux(socket, "send-keys", "-t", "dash", "C-r")
        screen = _wait_screen(socket, "· finished (done, ok)", timeout=180)
        groups = read_rows(tmp_path / "runs" / "master_groups.csv")
        assert [(g["exp_id"], g["status"]) for g in groups] == [("D_ens", "ok")]
        row = next(line for line in screen.splitlines() if "D_ens" in line and "done" in line)
        assert f"{float(groups[0]['T_group']):.2f} s" in row
        assert "campaign tmux · cpu" in screen and "cells 1/1: 1 done" in screen
        assert max(map(len, screen.splitlines())) == 150, screen  # the pane's width
        _tmux(socket, "send-keys", "-t", "dash", "q")
        _wait_screen(socket, "EXITED 0", timeout=30)
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True)
