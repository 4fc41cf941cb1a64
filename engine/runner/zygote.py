"""The runner's side of its zygote, the pre-warmed parent of its cells. Torch-free.

A runner starts one zygote (``python -m engine.cell --zygote FD``, :mod:`engine.cell.zygote`)
before its first cell, with the cells' environment, in a session of its own, with a
parent-death signal (it dies with the runner, even a SIGKILLed one) and its output in the
run folder's ``zygote.log``; it waits until the zygote has imported torch (that time belongs
to no cell). Each cell is then forked by the zygote instead of spawned (:meth:`Zygote.fork`):

1. the runner opens the cell's log, as for a spawned cell, and a pipe for its go;
2. it makes itself a child subreaper and sends the request (the log and the read end of
   the pipe travel as descriptors);
3. the zygote forks an intermediate, which forks the cell and exits once the cell leads a
   session of its own: the cell is re-parented to the runner; the zygote replies its pid;
4. the runner stops being a subreaper (orphans of other processes go to init again),
   checks that the cell is its child and leads its own session, and returns a handle
   (:class:`ForkedCell`); the caller records it in ``cell.pid`` and sends the go
   (:meth:`ForkedCell.go`), and only then does the cell ask for its parent-death signal
   and run. A cell that gets no go (the record could not be written, the runner died)
   exits without running anything.

If the zygote cannot start, or fails or dies later, :class:`ZygoteError` says why and the
runner starts that cell and the rest the old way (``cell_start`` = ``spawn``).
``FUGUE_CELL_START=spawn`` asks for the old way from the start (:func:`start_method`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from engine.cell.protocol import TITLE_ROOM, ZYGOTE_FLAG, receive_message, send_message
from engine.errors import ConfigError
from engine.processes import die_with_parent, set_child_subreaper

#: How a cell's process begins (the rows' ``cell_start``).
START_METHODS = ("zygote", "spawn")
#: The environment variable that chooses it (default: zygote; spawn: every cell a fresh
#: interpreter, as before the zygote, for debugging and for the bench's comparison).
START_ENV = "FUGUE_CELL_START"
#: Seconds the runner waits for the zygote's imports (torch: 3-6 s on a small idle host,
#: far more on a loaded one) before it starts cells the old way.
READY_TIMEOUT_S = 120.0
#: Seconds the runner waits for the zygote to fork one cell.
FORK_TIMEOUT_S = 30.0
#: The zygote's output, in the run folder.
ZYGOTE_LOG = "zygote.log"


class ZygoteError(Exception):
    """The zygote cannot start this cell (one line: why). The runner starts it the old way."""


def start_method(environ: dict[str, str] | None = None, platform: str = sys.platform) -> str:
    """The start method :data:`START_ENV` asks for; unset or empty: ``zygote`` on Linux,
    ``spawn`` elsewhere (handing a forked cell to the runner needs Linux's child subreaper,
    and the zygote's checks read ``/proc``).

    Raises:
        ConfigError: any other value (one line naming the variable and the choices).
    """
    value = (os.environ if environ is None else environ).get(START_ENV, "").strip()
    if not value:
        return "zygote" if platform.startswith("linux") else "spawn"
    if value not in START_METHODS:
        raise ConfigError(f"{START_ENV}: unknown cell start '{value}' (choose "
                          f"{' or '.join(START_METHODS)})")
    return value


class ForkedCell:
    """A cell the zygote forked and this runner adopted: its child, with what the runner
    uses of :class:`subprocess.Popen` (``pid``, ``returncode``, :meth:`poll`, :meth:`wait`)."""

    def __init__(self, pid: int, go_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self._go: int | None = go_fd

    def go(self) -> None:
        """Let the cell run (it is recorded): it asks for its parent-death signal and
        starts. A cell that died meanwhile reads nothing (its exit status says why)."""
        if self._go is None:
            return
        fd, self._go = self._go, None
        try:
            os.write(fd, b"g")
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    def withdraw(self) -> None:
        """The cell must not run: close its go without sending it (it exits)."""
        if self._go is not None:
            fd, self._go = self._go, None
            os.close(fd)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: its status is lost
                self.returncode = 255
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if timeout is not None and deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"cell pid {self.pid}", timeout)
            time.sleep(0.005)
        return code


class Zygote:
    """One runner's zygote (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen, sock: socket.socket, log: Path):
        self.proc, self._sock, self.log = proc, sock, log
        #: Why the zygote cannot start cells ("" while it can).
        self.broken = ""
        #: The facts of its ``ready`` message (pid, imports_s, threads, python_threads,
        #: cuda_initialized).
        self.facts: dict = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(cls, run_dir: Path, env: dict[str, str]) -> Zygote:
        """Start the zygote of this runner with the cells' environment ``env``; its output
        goes to ``run_dir/zygote.log``. Returns at once: :meth:`wait_ready` waits.

        Raises:
            ZygoteError: the process could not be started (no log, no process left).
        """
        log = run_dir / ZYGOTE_LOG
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "engine.cell", ZYGOTE_FLAG, str(theirs.fileno()),
                     " " * TITLE_ROOM],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                    preexec_fn=die_with_parent(os.getpid()))  # noqa: PLW1509 - as a cell's
        except OSError as exc:
            ours.close()
            raise ZygoteError(f"the zygote could not start: {exc}") from None
        finally:
            theirs.close()
        return cls(proc, ours, log)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait for the zygote's imports.

        Raises:
            ZygoteError: it said why it cannot serve, died, or took longer than ``timeout``
                (it is stopped then).
        """
        try:
            doc = self._receive(timeout)
        except ZygoteError as exc:
            self.fail(str(exc))
            raise
        if not doc.get("ready"):
            self.fail(str(doc.get("error") or f"unexpected message {doc}"))
            raise ZygoteError(self.broken)
        self.facts = doc

    def fork(self, argv: list[str], log_fd: int, env: dict[str, str]) -> ForkedCell:
        """Have the zygote fork a cell (``python -m engine.cell ARGV``) with output to
        ``log_fd`` and environment ``env``; adopt it (see the module docstring). The cell
        waits for :meth:`ForkedCell.go`.

        Raises:
            ZygoteError: the zygote is broken, gone, refused or timed out (then it is
                stopped: later cells start the old way); no cell of this request runs.
        """
        if self.broken:
            raise ZygoteError(self.broken)
        if self.proc.poll() is not None:
            self.fail(self._gone())
            raise ZygoteError(self.broken)
        go_r, go_w = os.pipe()
        request = {"op": "start", "argv": argv, "env": env, "cwd": os.getcwd(),
                   "runner_pid": os.getpid()}
        try:
            try:
                if not set_child_subreaper(True):
                    raise ZygoteError("this system cannot hand a forked cell to the runner "
                                      "(no child subreaper)")
                try:
                    send_message(self._sock, request, (log_fd, go_r))
                except OSError as exc:
                    raise ZygoteError(self._gone(exc)) from None
                reply = self._receive(FORK_TIMEOUT_S)
            finally:
                os.close(go_r)
                set_child_subreaper(False)  # orphans of other processes go to init again
            pid = reply.get("pid")
            if not isinstance(pid, int):
                raise ZygoteError("the zygote could not fork the cell: "
                                  f"{reply.get('error') or reply}")
            problem = _not_adopted(pid)
            if problem:
                _kill(pid)
                raise ZygoteError(problem)
        except BaseException as exc:
            os.close(go_w)  # a cell forked anyway reads no go: it exits without running
            if isinstance(exc, ZygoteError):
                self.fail(str(exc))
            raise
        return ForkedCell(pid, go_w)

    def _receive(self, timeout: float) -> dict:
        self._sock.settimeout(timeout)
        try:
            doc, fds = receive_message(self._sock)
        except TimeoutError:
            raise ZygoteError(f"the zygote did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise ZygoteError(self._gone(exc)) from None
        for fd in fds:  # it sends none
            os.close(fd)
        if doc is None:
            raise ZygoteError(self._gone())
        return doc

    def _gone(self, exc: OSError | None = None) -> str:
        """``the zygote exited (killed by signal 9 (SIGKILL); see .../zygote.log)``: how it
        ended (or the socket's error while it still runs)."""
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return f"the zygote stopped answering ({exc or 'its socket closed'}; see {self.log})"
        how = (f"killed by signal {-code} ({signal.Signals(-code).name})" if code < 0
               else f"exit status {code}")
        return f"the zygote exited ({how}; see {self.log})"

    def fail(self, reason: str) -> None:
        """The zygote can start no more cells (``reason``): stop it."""
        self.broken = self.broken or reason
        self.close()

    def close(self, grace: float = 2.0) -> None:
        """Stop the zygote: close its socket (it exits on EOF), SIGKILL it after ``grace``."""
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)


def _kill(pid: int) -> None:
    """SIGKILL a forked process the runner will not own (its session too, if it leads
    one), and reap it if it is the runner's child after all."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _not_adopted(pid: int) -> str:
    """Why the process the zygote forked is not a cell this runner can own ("" if it is):
    it must be this runner's child and lead a session of its own."""
    try:
        proc = psutil.Process(pid)
        parent = proc.ppid()
        session = os.getsid(pid)
    except (psutil.Error, ProcessLookupError):
        return f"the forked cell (pid {pid}) vanished before the runner adopted it"
    if parent != os.getpid():
        return (f"the forked cell (pid {pid}) was not handed to the runner (its parent is "
                f"pid {parent})")
    if session != pid:
        return f"the forked cell (pid {pid}) does not lead its own session ({session})"
    return ""
