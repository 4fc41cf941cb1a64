"""Issue 48, item 2 in a real terminal: the pager round trip. tmux runs ``fugue-tui
dashboard --attach`` on the committed recording (no campaign to run) with ``PAGER=less``;
``o`` hands the terminal to less on the selected cell's log, ``q`` quits less, and the
dashboard redraws and answers keys (``j`` moves the cell cursor; ``q`` quits it, status 0).

As :mod:`tests.e2e.test_dashboard_walkthrough`: a private tmux socket, the environment
given explicitly, each step waiting on the exact text it asserts; a timeout prints the
captured screen."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.snapshots.helpers import install

pytestmark = pytest.mark.slow

TMUX = shutil.which("tmux")
LESS = shutil.which("less")
ROOT = Path(__file__).resolve().parents[2]
SIZE = (80, 24)
#: Waits on the screen: generous, for a loaded two-core host.
UI_S = 60.0
START_S = 120.0
FIRST = "001-D_ens-seq-p1-7b9b2584"
#: A line of the first cell's log only a pager showing the file's start can show (the
#: dashboard's log pane shows its tail).
MARKER = "first line of the log, for the pager"


class Term:
    """One tmux session on a private socket."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, env=env).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "dash", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "dash")

    def wait(self, test, what: str, timeout: float = UI_S) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if test(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; "
                                     f"the screen:\n{screen}")
            time.sleep(0.1)


def selected(screen: str) -> int | None:
    """The number of the cell the job pane shows: ``[3/20] D_ens seq ...``."""
    found = re.search(r"(?:│|^)\[(\d+)/20\] ", screen, re.M)
    return int(found.group(1)) if found else None


@pytest.mark.skipif(TMUX is None or LESS is None, reason="the pager round trip in a real "
                    "terminal needs tmux and less (apt-get install tmux less)")
def test_pager_round_trip_in_a_real_terminal(tmp_path, data_dir):
    runs = install(tmp_path)
    log = runs / "speed" / "cells" / FIRST / "attempt-1" / "cell.log"
    log.write_text("\n".join([MARKER] + [f"step {i}" for i in range(1, 200)]) + "\n")
    term = Term(f"fugue-pager-{os.getpid()}")
    env = {"FUGUE_DATA_DIR": str(data_dir), "FUGUE_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "FUGUE_PLUGINS": "",
           "NO_COLOR": "1", "PAGER": "less", "LESS": "", "LESSKEY": "/dev/null"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(tmp_path))} && env {exports} {shlex.quote(sys.executable)}"
               f" -m fugue_tui dashboard --attach runs/speed; echo EXITED $?; sleep 600")
    began = time.monotonic()
    term.tmux("new-session", "-d", "-s", "dash", "-x", str(SIZE[0]), "-y", str(SIZE[1]),
              command)
    try:
        term.tmux("set-option", "-s", "escape-time", "500")
        term.wait(lambda s: "cells 20/20" in s, "the dashboard", timeout=START_S)
        term.keys("g")  # the first cell: its log
        term.wait(lambda s: selected(s) == 1 and "step 199" in s, "the first cell's log")
        # o: less on the log, from its first line; the dashboard is gone meanwhile
        term.keys("o")
        pager = term.wait(lambda s: MARKER in s and "cells 20/20" not in s, "less")
        assert "step 1" in pager.splitlines()[1], pager
        term.keys("q")  # quit less: the dashboard redraws
        term.wait(lambda s: "cells 20/20" in s and MARKER not in s and selected(s) == 1,
                  "the dashboard back")
        term.keys("j")  # and answers keys
        term.wait(lambda s: selected(s) == 2, "j after the pager")
        term.keys("q")
        term.wait(lambda s: "EXITED 0" in s, "the dashboard to quit (status 0)")
    finally:
        socket = term.tmux("display", "-p", "#{socket_path}").strip()
        subprocess.run([TMUX, "-L", term.socket, "kill-server"], capture_output=True)
        Path(socket).unlink(missing_ok=True)
        print(f"\npager round trip: {time.monotonic() - began:.1f} s; "
              f"load {os.getloadavg()[0]:.1f}")
