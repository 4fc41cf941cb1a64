"""mp's pre-warmed parent, the cell's side (``[options.mp] start = "forkserver"``).

The parent is the standard library's fork server (``multiprocessing``'s ``forkserver``
start method): a process started by the cell that imports torch, the engine and the
plugins once (``engine.executors.mp.parent_preload``) and then forks one worker per job on
request, so a job costs a fork instead of an interpreter start and an import. What the
library leaves open is closed here:

- **Ready before the window.** ``ensure_running`` returns as soon as the server process
  exists, before its imports; the first worker would then wait for them inside
  ``T_group``. :meth:`PrewarmedParent.start` forks one probe child (:func:`probe`) and waits
  for its answer: the parent's start, imports included, is the executor's setup
  (``setup_s``), as the window rule asks (docs/measurement.md).
- **Checked, not assumed.** The probe reports what the parent imported, whether its
  preload failed (the library swallows ``ImportError``), whether CUDA was initialised in it
  (a plugin's import could; a CUDA context does not survive ``fork``), whether the forked
  child is in torch's "bad fork" state, whether the parent mapped the CUDA driver library
  and, if so, whether the driver was initialised (asked of the driver by the preload:
  ``parent_preload.cuda_driver_state``), and the parent's thread count. A parent without
  torch, with a failed import, with CUDA or the CUDA driver initialised (or a driver whose
  state cannot be told) is refused with one line naming what to do (``start = "spawn"``).
- **Nothing survives the cell.** The parent carries a parent-death signal on the cell
  (set by the preload, in the parent itself: the library starts it without a hook), and
  each worker one on the parent, so a SIGKILLed cell takes both down; both stay in the
  cell's session (the watchdog counts them, a session kill reaches them). The cell's main
  thread must start it: the kernel sends the signal when the *thread* that forked the
  parent ends. :meth:`PrewarmedParent.stop` closes the library's "alive" pipe (the
  parent's normal exit), waits ``grace`` seconds, then SIGKILLs it; the library's own
  ``_stop`` waits without a limit.
- **A parent that died is not restarted.** The library would silently start a new one,
  imports and all, inside the group window; :meth:`PrewarmedParent.alive` lets the
  executor fail the jobs instead.

The stdlib's ``ForkServer`` keeps the server's pid and "alive" descriptor in private
attributes (``_forkserver_pid``, ``_forkserver_alive_fd``, the same from Python 3.8 to
3.13); they are read here and nowhere else, and tests/unit/engine/executors/mp/test_mp_forkserver.py checks the
server's whole life. Torch-free (the probe imports torch only in the forked child, where
the parent already has).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.forkserver as stdlib_forkserver
import os
import signal
import sys
import time
from typing import Any

from engine.errors import FugueError
from engine.executors.mp.parent_preload import PARENT_ENV

PRELOAD = "engine.executors.mp.parent_preload"
#: Seconds to wait for the parent's probe: its imports on a loaded small host take ~10 s.
READY_TIMEOUT_S = 300.0
#: Seconds between closing the parent's pipe and SIGKILL.
STOP_GRACE_S = 5.0


def probe(conn: Any) -> None:
    """Runs in a child forked by the parent: report what the parent holds (see the module
    docstring). Sends one dict and exits."""
    facts: dict[str, Any] = {"parent_pid": os.getppid()}
    state = getattr(sys.modules.get(PRELOAD), "STATE", None)
    facts["preload"] = dict(state) if state else None
    torch = sys.modules.get("torch")
    facts["torch"] = torch is not None
    if torch is not None:
        facts["cuda_initialized_here"] = torch.cuda.is_initialized()
        facts["bad_fork"] = torch.cuda._is_in_bad_fork()
    try:
        facts["parent_threads"] = len(os.listdir(f"/proc/{os.getppid()}/task"))
        with open(f"/proc/{os.getppid()}/maps", encoding="utf-8", errors="replace") as maps:
            facts["parent_cuda_driver"] = any("libcuda.so" in line for line in maps)
    except OSError:  # not Linux
        pass
    conn.send(facts)
    conn.close()


class PrewarmedParent:
    """The fork server of one cell: :meth:`start` in setup, :attr:`context` to start
    workers, :meth:`stop` in teardown."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("forkserver")
        self.pid: int | None = None
        self.exit: str | None = None  # how it ended, once it did
        self.info: dict[str, Any] = {}

    def start(self) -> dict[str, Any]:
        """Start the parent and wait until it has imported everything; return its facts
        (``pid``, ``start_s``, the probe's report) for ``executor_info``.

        Raises:
            FugueError: the parent did not come up, imported no torch, failed its preload,
                or initialised CUDA (one line each).
        """
        t0 = time.perf_counter()
        self.context.set_forkserver_preload([PRELOAD])
        os.environ[PARENT_ENV] = json.dumps({"pid": os.getpid(), "sys_path": sys.path})
        try:
            stdlib_forkserver.ensure_running()
        except OSError as exc:  # e.g. its socket's path under a long TMPDIR (107 bytes)
            raise FugueError(f"[options.mp] start = \"forkserver\": the pre-warmed parent "
                             f"could not start: {exc}") from None
        finally:
            del os.environ[PARENT_ENV]  # only the server's environment carries it
        server = stdlib_forkserver._forkserver
        self.pid = server._forkserver_pid
        receiver, sender = self.context.Pipe(duplex=False)
        child = self.context.Process(target=probe, args=(sender,), name="fugue-mp-probe")
        child.start()
        sender.close()
        try:
            if not receiver.poll(READY_TIMEOUT_S):
                raise FugueError(f"[options.mp] start = \"forkserver\": the pre-warmed parent "
                                 f"(pid {self.pid}) did not answer within {READY_TIMEOUT_S:g} s")
            facts = receiver.recv()
        except EOFError:
            raise FugueError("[options.mp] start = \"forkserver\": the pre-warmed parent's "
                             f"probe died (exit status {child.exitcode})") from None
        finally:
            receiver.close()
            child.join(10)
        self.info = {"pid": self.pid, "start_s": time.perf_counter() - t0, **facts}
        self._check(facts)
        return self.info

    def _check(self, facts: dict[str, Any]) -> None:
        preload = facts.get("preload") or {}
        where = f"[options.mp] start = \"forkserver\": the pre-warmed parent (pid {self.pid})"
        if preload.get("error"):
            raise FugueError(f"{where} failed to import: {preload['error']}")
        if not facts.get("torch"):
            raise FugueError(f"{where} did not import torch (its preload did not run)")
        if preload.get("cuda_initialized") or facts.get("bad_fork"):
            raise FugueError(f"{where} initialised CUDA while importing (a plugin?); forked "
                             "workers cannot use it: use start = \"spawn\"")
        state = str(preload.get("cuda_driver") or "")
        if facts.get("parent_cuda_driver") and state != "loaded":
            # A runtime call (torch.cuda.is_available() without the NVML check is one)
            # initialises the driver, and torch's bad-fork flag does not see it: a forked
            # child cannot use the GPU then. A driver merely mapped (a CUDA build's import,
            # triton) is harmless; the preload asked the driver which (cuda_driver_state),
            # and an answer other than "loaded" — "unknown" included — is refused.
            steps = preload.get("cuda_driver_steps") or {}
            culprit = next((step for step, seen in steps.items()
                            if seen.startswith("initialised")), None)
            how = (f"initialised the CUDA driver while importing {culprit}" if culprit else
                   f"loaded the CUDA driver while importing (its state: {state or 'unknown'})")
            raise FugueError(f"{where} {how} (a call such as torch.cuda.is_available() in a "
                             "plugin); forked workers could not use the GPU: use start = "
                             "\"spawn\"")

    def alive(self) -> bool:
        """Whether the parent still runs (reaps it when it has ended, noting how)."""
        if self.pid is None or self.exit is not None:
            return False
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, None
        if pid == 0:
            return True
        self.exit = _status_text(status)
        self._forget()
        return False

    def stop(self, grace: float = STOP_GRACE_S) -> str:
        """End the parent (its workers must be stopped first: they hold its pipe too) and
        say how: ``exit status 0`` (it saw its pipe close and left), ``killed by SIGKILL
        after <grace> s``, or how it had ended before."""
        if self.pid is None or self.exit is not None:
            return self.exit or "not started"
        server = stdlib_forkserver._forkserver
        if server._forkserver_pid == self.pid and server._forkserver_alive_fd is not None:
            with contextlib.suppress(OSError):
                os.close(server._forkserver_alive_fd)  # its normal end: EOF on its pipe
            server._forkserver_alive_fd = None
        deadline = time.monotonic() + grace
        while self.alive():
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.pid, 0)
                self.exit = f"killed by SIGKILL after {grace:g} s"
                self._forget()
                break
            time.sleep(0.01)
        return self.exit or "ended"

    def _forget(self) -> None:
        """The library's record of a server that ended: cleared, so that nothing (a later
        cell in this process: tests) talks to a dead one, and its socket file removed."""
        server = stdlib_forkserver._forkserver
        if server._forkserver_pid != self.pid:
            return
        with contextlib.suppress(OSError, TypeError):
            if server._forkserver_alive_fd is not None:
                os.close(server._forkserver_alive_fd)
        address = server._forkserver_address
        if address and not address.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(address)
        server._forkserver_pid = server._forkserver_alive_fd = None
        server._forkserver_address = None


def _status_text(status: int | None) -> str:
    if status is None:
        return "ended (reaped elsewhere)"
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"
