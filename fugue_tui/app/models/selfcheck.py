"""The plan screen's self-check line, Textual-free: this machine's last verdict of
``fugue-tui selfcheck`` (read from ``<runs_dir>/selfcheck.csv``, ``engine.selfcheck.store``)
in one line, and the run that refreshes it (a subprocess, from a worker thread).

"This machine" is the host with this torch build (host, torch, CUDA build of the profile
identity, ``engine.profile.store.identity``): the latest verdict of any device there.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.selfcheck.verdict import BIT_FOR_BIT, OUTSIDE, WITHIN

#: The identity fields that say "this machine" (any device on it).
MACHINE = ("host", "torch", "cuda")
#: The key the plan screen runs it with (actions: ``plan.selfcheck``).
KEY_HINT = "F6"
#: Seconds the dashboard lets a self-check run (the check itself takes well under one).
TIMEOUT_S = 300.0


def _when(stamp: str) -> str:
    """``20261204_151720`` → ``2026-12-04 15:17 UTC`` (anything else as it is)."""
    if len(stamp) == 15 and stamp[8] == "_" and stamp.replace("_", "").isdigit():
        return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]} UTC"
    return stamp


def last_line(runs_dir: str | os.PathLike[str]) -> str:
    """``self-check: 9 bit for bit, 12 within bound, 0 outside (cpu, 2026-12-04 15:17 UTC)
    · F6 reruns``, or that it never ran here, or that its file cannot be read. The counts
    first: a narrow terminal cuts the line's end."""
    from engine.errors import FugueError
    from engine.profile.store import identity
    from engine.selfcheck.store import latest

    try:
        found = latest(Path(os.path.expanduser(str(runs_dir))), identity("cpu"), MACHINE)
    except (OSError, FugueError) as exc:
        return f"self-check: cannot read its verdicts ({exc})"
    if found is None:
        return f"self-check: never run here · {KEY_HINT} runs it"
    counts = ", ".join(f"{'?' if found.count(v) is None else found.count(v)} "
                       f"{'outside' if v == OUTSIDE else v}"
                       for v in (BIT_FOR_BIT, WITHIN, OUTSIDE))
    alarm = "" if found.ok else " — a defect, please report it"
    return (f"self-check: {counts}{alarm} ({found.row.get('device') or '?'}, "
            f"{_when(found.timestamp)}) · {KEY_HINT} reruns")


@dataclass(frozen=True)
class Outcome:
    """How a self-check run from the dashboard ended: its exit status (None: it did not
    run to its end) and one line for a notification."""

    status: int | None
    message: str

    @property
    def severity(self) -> str:
        return "information" if self.status == 0 else "error"


def command(runs_dir: str | os.PathLike[str]) -> list[str]:
    """The self-check as the dashboard runs it: ``fugue-tui selfcheck --json`` on the CPU,
    its verdict stored in the plan's runs folder."""
    return [sys.executable, "-m", "fugue_tui", "selfcheck", "--json", "--runs-dir",
            os.path.expanduser(str(runs_dir))]


def run(runs_dir: str | os.PathLike[str], timeout: float = TIMEOUT_S,
        started: Any = None) -> Outcome:
    """Run the self-check to its end (blocking: call from a worker thread); ``started``
    gets its process (see ``fugue_tui.app.process.run_to_end``)."""
    import subprocess

    from fugue_tui.app.process import run_to_end

    try:
        done = run_to_end(command(runs_dir), timeout=timeout, started=started)
    except subprocess.TimeoutExpired:
        return Outcome(None, f"self-check: stopped after {timeout:g} s")
    except OSError as exc:
        return Outcome(None, f"self-check: cannot start: {exc}")
    if done.returncode == 0:
        return Outcome(0, "self-check: every path at or inside its documented bound")
    if done.returncode == 1:
        return Outcome(1, "self-check: a path is outside its bound — a defect, please report "
                          "it (fugue-tui selfcheck shows which)")
    tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    return Outcome(done.returncode, f"self-check did not run: {tail[0]}")
