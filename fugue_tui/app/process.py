"""The runner process as the dashboard sees it: started detached, found again, stopped.

Textual-free. The dashboard starts ``python -m engine.runner`` in a session of its own
(``start_new_session``) with no parent-death signal, so "detach" can leave it running
headless after the dashboard exits; its stdout and stderr go to ``runner.out`` in the run
folder. A later dashboard finds it again through ``runner.pid`` (written by the runner,
removed when it ends). "Stop" aborts it through its control folder (the running cell is
recorded as killed, "stopped from the dashboard"; exit 3), interrupts it (SIGINT) if that
does not end it, and waits until neither the runner nor the cell processes it had are left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from engine.processes import engine_env
from engine.runfolder import RunFolder

#: Seconds to wait for the runner to stop its cell after SIGINT before SIGKILL.
STOP_TIMEOUT_S = 60.0
#: The runner's own output (usage errors, tracebacks) when the dashboard started it.
OUT_NAME = "runner.out"


#: The kill reason the dashboard's Stop records (not "interrupted (Ctrl-C)": nobody typed it).
STOP_REASON = "stopped from the dashboard"
#: Seconds for the runner to act on the abort command before it is interrupted (it reads
#: its control folder between two checks of the running cell, a fraction of a second).
ABORT_WAIT_S = 15.0


@dataclass
class RunnerHandle:
    """A runner process: ours (``proc``) or found through ``runner.pid`` (``pid`` only)."""

    run_dir: Path
    pid: int
    proc: subprocess.Popen | None = None
    create_time: float | None = None
    cell_pids: set[int] = field(default_factory=set)

    def alive(self) -> bool:
        """True while the runner process exists (a zombie child counts as ended)."""
        if self.proc is not None:
            return self.proc.poll() is None
        return _alive(self.pid, self.create_time)

    def exit_code(self) -> int | None:
        """The exit status when this dashboard started the runner and it ended, else None."""
        return self.proc.poll() if self.proc is not None else None

    def _abort(self, reason: str) -> None:
        from engine.errors import FugueError
        from engine.runner.control import send

        try:
            send(self.run_dir, "abort", reason=reason)
        except FugueError:
            return  # no control folder to write to: SIGINT does it
        deadline = time.monotonic() + ABORT_WAIT_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)

    def output_tail(self, lines: int = 5) -> str:
        """The last lines the runner printed (its reason when it refused to start)."""
        try:
            text = (self.run_dir / OUT_NAME).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(line for line in text.splitlines()[-lines:] if line.strip())

    def stop(self, timeout: float = STOP_TIMEOUT_S, cell_pids: set[int] | None = None,
             reason: str | None = STOP_REASON) -> list[int]:
        """Stop the runner: first the control command ``abort`` with ``reason`` (the running
        cell is recorded as killed for that reason, the campaign as aborted), then, if it is
        still alive after :data:`ABORT_WAIT_S` (or without a reason), SIGINT; wait for it and
        for ``cell_pids`` to end, SIGKILL what is left after ``timeout``. Returns the pids
        that had to be killed (empty when everything stopped by itself)."""
        pids = set(cell_pids or ()) | self.cell_pids
        if self.alive() and reason:
            self._abort(reason)
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        forced = []
        if self.alive():
            forced.append(self.pid)
            _kill(self.pid)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # Cells die with their runner (parent-death signal); wait for that to be true.
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids:
            if _alive(pid):
                forced.append(pid)
                _kill(pid)
        return forced


def _alive(pid: int, create_time: float | None = None) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 1.0
    except psutil.Error:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start_runner(run_dir: str | Path, argv: list[str], cwd: str | Path | None = None
                 ) -> RunnerHandle:
    """Start the runner detached: its own session, stdin from /dev/null, output appended to
    ``run_dir/runner.out``; it outlives the dashboard unless stopped.

    Raises:
        OSError: the run folder cannot be created or the process cannot start.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / OUT_NAME, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=engine_env(), cwd=cwd,
                                start_new_session=True)
    return RunnerHandle(run_dir, proc.pid, proc)


def find_runner(run_dir: str | Path) -> RunnerHandle | None:
    """The live runner of a run folder (from ``runner.pid`` on this host), or None."""
    run_dir = Path(run_dir)
    try:
        info = json.loads(RunFolder(run_dir).runner_pid.read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if info.get("host") not in (None, os.uname().nodename):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or "engine.runner" not in " ".join(
                proc.cmdline()):
            return None
        created = proc.create_time()
    except psutil.Error:
        return None
    return RunnerHandle(run_dir, pid, None, created)


def running_campaigns(runs_dir: str | Path) -> list[Path]:
    """Run folders under ``runs_dir`` whose runner is alive on this host."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    return sorted(p.parent for p in root.glob("*/runner.pid") if find_runner(p.parent))


@dataclass(frozen=True)
class RecentRun:
    """A campaign's run folder under a runs folder: ``path``, whether its runner is
    ``live`` on this host, and when its runner last wrote (``runner.jsonl``'s mtime, Unix
    seconds)."""

    path: Path
    live: bool
    mtime: float


def recent_runs(runs_dir: str | Path, limit: int = 8) -> list[RecentRun]:
    """The run folders under ``runs_dir`` whose runner left a ``runner.jsonl`` (running or
    ended: what attach can open), newest first, at most ``limit``; [] without the folder."""
    root = Path(runs_dir)
    live = set(running_campaigns(root))
    found = []
    for log in root.glob("*/runner.jsonl"):
        try:
            found.append(RecentRun(log.parent, log.parent in live, log.stat().st_mtime))
        except OSError:  # gone meanwhile
            continue
    found.sort(key=lambda r: r.mtime, reverse=True)
    return found[:limit]


def attach_offer(runs_dir: str | Path, runs: list[RecentRun]) -> tuple[str, list[tuple[str, str]]]:
    """What the attach dialog proposes: the folder typed in at first (the newest running
    campaign's, else the newest run folder, else ``runs_dir`` itself: never a folder that
    does not exist) and each of ``runs`` as ``(path, "name · running|ended <when>")``."""
    live = [r for r in runs if r.live]
    first = live[0] if live else runs[0] if runs else None
    default = str(first.path) if first is not None else str(Path(runs_dir)) + os.sep
    when = "%d %b %H:%M"
    choices = [(str(r.path), f"{r.path.name} · " + (
        "running" if r.live else f"ended {time.strftime(when, time.localtime(r.mtime))}"))
        for r in runs]
    return default, choices


def run_to_end(argv: list[str], cwd: str | Path | None = None, timeout: float = 300.0,
               started: Callable[[subprocess.Popen], None] | None = None
               ) -> subprocess.CompletedProcess:
    """Run a short command of ours (``fugue-tui selfcheck``) to its end from a worker
    thread: stdin from /dev/null, output captured, the engine's environment
    (:func:`engine.processes.engine_env`), a session of its own (a Ctrl-C in the dashboard
    does not reach it). Killed after ``timeout`` seconds (``subprocess.TimeoutExpired``).
    ``started`` gets the process as soon as it runs, so that the caller can end its session
    early (the dashboard quitting: :func:`stop_session`) instead of waiting for it.

    Raises:
        OSError: the process cannot start.
        subprocess.TimeoutExpired: it outlived ``timeout``.
    """
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=engine_env(), cwd=cwd,
                          start_new_session=True) as proc:
        if started is not None:
            started(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_session(proc)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def stop_session(proc: subprocess.Popen) -> None:
    """SIGKILL the session ``proc`` leads (it and what it started), if it still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
