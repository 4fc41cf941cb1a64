"""A private CUDA MPS control daemon for the ``mp`` executor: its start, identity and stop
(the checks before it, which only read the machine, are in ``engine.executors.mp.mps_checks``).

CUDA MPS (Multi-Process Service) lets the CUDA contexts of several processes share one
GPU's streaming multiprocessors at the same time instead of time-slicing. Its control
daemon, ``nvidia-cuda-mps-control -d``, listens on a Unix socket in its *pipe directory*
(``CUDA_MPS_PIPE_DIRECTORY``, default ``/tmp/nvidia-mps``); every CUDA process whose
environment names that directory becomes a client of the daemon's server. So:

- our daemon gets its own short pipe directory (a Unix socket path must stay under 107
  bytes) — never the default, which would capture every other CUDA process on the machine —
  and only the cell's worker processes get its environment (:meth:`MPSDaemon.client_env`);
- the daemon double-forks out of the cell's session, so the caller records it with
  :func:`engine.cleanup.record` (handler :func:`quit_recorded_daemon`), and the runner quits
  it after any end of the cell;
- a daemon that is not ours (``mps_checks.foreign_daemons``) is reported, never reused or
  stopped; only processes identified as ours (pid, start time, pipe directory) are signalled;
- the GPU's compute mode is read first (``mps_checks.compute_mode``,
  ``mps_checks.check_compute_mode``): PROHIBITED allows no context at all,
  EXCLUSIVE_PROCESS allows one process, which with MPS is the MPS server.

Sources: NVIDIA, "Multi-Process Service" (the MPS user guide: pipe/log directories,
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, the ``quit`` and ``get_server_list`` commands,
compute modes); NVML ``nvmlDeviceGetComputeMode``. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from engine.errors import FugueError
from engine.executors.mp.mps_checks import (
    DEFAULT_PIPE_DIR,
    is_control_daemon,
    is_mps_process,
    pipe_dir_of,
)

#: ``sun_path`` holds 108 bytes including the terminating NUL.
SOCKET_PATH_LIMIT = 107
#: The longest socket name the daemon and its server create in the pipe directory
#: (``control``, ``control_privileged``, per-server sockets): room kept below the limit.
_SOCKET_NAME_ROOM = 32
#: Seconds to wait for the daemon's control socket after ``-d`` returns.
START_TIMEOUT_S = 10.0
#: Seconds a control command (``quit``, ``get_server_list``) may take.
COMMAND_TIMEOUT_S = 10.0
#: Seconds between SIGTERM and SIGKILL for a daemon that ignored ``quit``.
TERM_GRACE_S = 5.0
PID_FILE = "nvidia-cuda-mps-control.pid"


class MPSError(FugueError):
    """The MPS daemon could not be started, queried or stopped (one-line message)."""


def _private_root() -> Path:
    """A new private folder with a short path: in the temporary folder when that is short
    enough for sockets, else in /tmp. Never the default pipe directory."""
    base = tempfile.gettempdir()
    if len(base) + len("/fugue-mps-XXXXXXXX/pipe") + _SOCKET_NAME_ROOM > SOCKET_PATH_LIMIT:
        base = "/tmp"
    root = Path(tempfile.mkdtemp(prefix="fugue-mps-", dir=base))
    os.chmod(root, 0o700)  # clients of another user must not attach to our daemon
    return root


@dataclass
class MPSDaemon:
    """Our private MPS control daemon (start with :meth:`start`, stop with :meth:`quit`).

    ``pipe_dir`` holds its sockets (short path), ``log_dir`` its ``control.log`` and
    ``server.log``; ``root`` is the private folder removed by :meth:`quit` (the log folder
    is kept when it lies elsewhere, e.g. in the run folder). ``pid``/``create_time``
    identify the daemon process (``psutil``), so a reused pid is never signalled.
    """

    control: str
    root: Path
    pipe_dir: Path
    log_dir: Path
    pid: int | None = None
    create_time: float | None = None
    start_s: float | None = None
    start_output: str = ""

    @classmethod
    def create(cls, control: str, log_dir: str | Path | None = None) -> "MPSDaemon":
        """Make the private folders (pipe directory with a short path; ``log_dir``, default
        a private folder beside it) without starting anything, so the caller can record the
        daemon before it exists (:meth:`record_info`)."""
        root = _private_root()
        pipe_dir = root / "pipe"
        pipe_dir.mkdir(mode=0o700)
        # Absolute: the daemon changes its working directory to / when it detaches.
        logs = Path(log_dir).resolve() if log_dir is not None else root / "log"
        logs.mkdir(parents=True, exist_ok=True)
        if (str(pipe_dir) == DEFAULT_PIPE_DIR
                or len(str(pipe_dir)) + _SOCKET_NAME_ROOM > SOCKET_PATH_LIMIT):
            shutil.rmtree(root, ignore_errors=True)
            raise MPSError(f"private MPS pipe directory {pipe_dir} is unusable (shared or too "
                           f"long for a socket path)")
        return cls(control=control, root=root, pipe_dir=pipe_dir, log_dir=logs)

    @classmethod
    def start(cls, control: str, log_dir: str | Path | None = None,
              timeout: float = START_TIMEOUT_S) -> "MPSDaemon":
        """:meth:`create` then :meth:`launch`."""
        daemon = cls.create(control, log_dir)
        daemon.launch(timeout)
        return daemon

    def launch(self, timeout: float = START_TIMEOUT_S) -> None:
        """Run ``control -d`` with our directories, wait until the daemon answers
        ``get_server_list`` through our pipe directory, and find its pid (``start_s``:
        seconds this took).

        Raises:
            MPSError: the command failed or did not return, or the daemon did not answer
                within ``timeout`` s (it is stopped and the private folder removed first).
        """
        t0 = time.perf_counter()
        out_path = self.log_dir / "start.out"
        try:
            # Output to a file, not a pipe: the forked daemon may keep inherited descriptors
            # open, and reading a pipe would then wait for the daemon to exit.
            with open(out_path, "wb") as out:
                code = subprocess.run([self.control, "-d"], env=self.env(),
                                      stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=timeout).returncode
            self.start_output = out_path.read_text(errors="replace").strip()
            if code != 0:
                raise MPSError(f"{self.control} -d exited with status {code}: "
                               f"{_first_line(self.start_output) or 'no output'}")
            # Ready when it answers a harmless command through our pipe directory (the
            # socket file appears at bind(), a moment before the daemon accepts).
            deadline = time.monotonic() + timeout
            while True:
                if (self.pipe_dir / "control").exists():
                    code, _ = self.command("get_server_list",
                                           timeout=max(1.0, deadline - time.monotonic()))
                    if code == 0:
                        break
                if time.monotonic() > deadline:
                    raise MPSError(f"{self.control} -d: the daemon did not answer through "
                                   f"{self.pipe_dir} within {timeout:.0f} s (log: {self.log_dir})")
                time.sleep(0.02)
            self._find_pid()
        except subprocess.TimeoutExpired:
            self.quit()
            raise MPSError(f"{self.control} -d did not return within {timeout:.0f} s") from None
        except OSError as exc:
            self.quit()
            raise MPSError(f"{self.control} -d: {exc}") from None
        except BaseException:
            self.quit()
            raise
        self.start_s = time.perf_counter() - t0

    def env(self) -> dict[str, str]:
        """This process's environment plus the daemon's directories (for control commands)."""
        return {**os.environ, **self.dirs_env()}

    def dirs_env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir),
                "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}

    def client_env(self, thread_pct: int | None) -> dict[str, str]:
        """The variables that make a process a client of this daemon (give them to worker
        processes only, never to the cell): the pipe and log directories and, when given,
        ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``."""
        env = self.dirs_env()
        if thread_pct is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(thread_pct)
        return env

    def _find_pid(self) -> None:
        """The daemon's pid: its pid file in the pipe directory, else the control process
        whose environment names our pipe directory."""
        pid = None
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.pipe_dir / PID_FILE).read_text().split()[0])
        if pid is None:
            pid = next((p.pid for p in psutil.process_iter() if is_control_daemon(p)
                        and pipe_dir_of(p) == str(self.pipe_dir)), None)
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                self.create_time = psutil.Process(pid).create_time()
                self.pid = pid

    def command(self, text: str, timeout: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
        """Send one control command (``echo TEXT | nvidia-cuda-mps-control`` with our pipe
        directory); return the exit status and output. A timeout is status 124."""
        try:
            done = subprocess.run([self.control], input=text + "\n", env=self.env(),
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, f"no answer to {text!r} within {timeout:.0f} s"
        except OSError as exc:
            return 127, str(exc)
        return done.returncode, (done.stdout + done.stderr).strip()

    def working(self) -> bool:
        """True when the daemon answers ``get_server_list``."""
        return self.command("get_server_list")[0] == 0

    def record_info(self) -> dict[str, Any]:
        """What :func:`quit_recorded_daemon` needs to stop exactly this daemon."""
        return {"control": self.control, "root": str(self.root), "pipe_dir": str(self.pipe_dir),
                "log_dir": str(self.log_dir), "pid": self.pid, "create_time": self.create_time}

    def quit(self, grace: float = TERM_GRACE_S) -> str:
        """Stop the daemon: the ``quit`` command, then (only for a process verified to be
        ours) SIGTERM, ``grace`` s, SIGKILL; remove the private folder. Returns a one-line
        account. Never raises for a daemon that is already gone."""
        return quit_recorded_daemon(self.record_info(), grace=grace)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _ours(pid: int | None, create_time: float | None, pipe_dir: str) -> psutil.Process | None:
    """The process ``pid`` if it is still the one we started (same start time, and its
    environment names our pipe directory when readable); None otherwise."""
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.05:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        env_dir = pipe_dir_of(proc)
        if env_dir is not None and env_dir != pipe_dir:
            return None
        return proc
    except psutil.Error:
        return None


def _our_mps_processes(pipe_dir: str) -> list[psutil.Process]:
    """MPS control/server processes whose environment names our private pipe directory."""
    out = []
    for proc in psutil.process_iter():
        if is_mps_process(proc) and pipe_dir_of(proc) == pipe_dir:
            out.append(proc)
    return out


def _gone(proc: psutil.Process) -> bool:
    """Exited: no such process, or a zombie waiting for its new parent (init) to reap it —
    a double-forked daemon's exit status is nobody's to wait for."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` s for ``procs`` (not our children) to exit; return the rest."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if not _gone(p)]
    return alive


def quit_recorded_daemon(info: dict[str, Any], grace: float = TERM_GRACE_S) -> str:
    """Cleanup handler (``engine.cleanup``): stop the daemon a record describes.

    ``info``: ``control``, ``pipe_dir``, ``root``, ``pid``, ``create_time`` (from
    :meth:`MPSDaemon.record_info`). Sends ``quit`` through our pipe directory, waits up to
    ``grace`` s, then SIGTERM and SIGKILL — only to processes identified as ours by pid,
    start time and pipe directory; servers of our daemon are stopped the same way. Removes
    the private folder. Returns a one-line account.
    """
    pipe_dir = str(info["pipe_dir"])
    if pipe_dir == DEFAULT_PIPE_DIR:  # never ours by construction: refuse to touch it
        return f"refused: {pipe_dir} is the shared default pipe directory"
    proc = _ours(info.get("pid"), info.get("create_time"), pipe_dir)
    said = ""
    if proc is not None or Path(pipe_dir, "control").exists():
        try:
            done = subprocess.run([info["control"]], input="quit\n",
                                  env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": pipe_dir,
                                       "CUDA_MPS_LOG_DIRECTORY": str(info.get("log_dir", ""))},
                                  capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
            said = f"quit: status {done.returncode}"
        except (subprocess.TimeoutExpired, OSError) as exc:
            said = f"quit failed: {type(exc).__name__}"
    procs = ([proc] if proc is not None else []) + [
        p for p in _our_mps_processes(pipe_dir) if proc is None or p.pid != proc.pid]
    alive = _wait_gone(procs, grace)
    forced = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive:
            break
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)
                forced.append(f"{p.pid}:{signal.Signals(sig).name}")
        alive = _wait_gone(alive, grace)
    root = info.get("root")
    if root and Path(root).name.startswith("fugue-mps-"):
        shutil.rmtree(root, ignore_errors=True)
    if not procs and not said:
        return f"MPS daemon (pid {info.get('pid')}, {pipe_dir}) was already gone"
    message = f"MPS daemon pid {info.get('pid')} ({pipe_dir}) stopped; {said or 'no quit sent'}"
    if forced:
        message += f"; signalled {', '.join(forced)}"
    if alive:
        message += f"; still alive: {[p.pid for p in alive]}"
    return message
