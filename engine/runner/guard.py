"""The runner's guard: nothing of a campaign outlives its runner by more than a few seconds.

A runner killed by SIGKILL (``kill -9``, the OOM killer, a front end it dies with) runs no
clean-up of its own. The kernel kills its cell at once (the cell's parent-death signal,
:mod:`engine.runner.cellproc`), but not what the cell started outside its session: a Ray
runtime's processes (its agents re-parent to init and run in sessions of their own) and
its ``/tmp/fr-*`` folder, an MPS daemon, and the cell's ``/tmp/fugue-cell-*`` scratch
folder. Without a guard those stayed until the next runner of the campaign came along, if
one ever did.

So each runner starts this small torch-free process, ``python -m engine.runner.guard
RUN_DIR RUNNER_PID``, in a session of its own (a Ctrl-C or a signal to the runner's
process group does not reach it), with the read end of a pipe as its stdin; only the
runner holds the write end. However the runner's process ends, the kernel closes that end
and the guard reads EOF. It then does at once what the next runner would do for the
attempts of that runner that never ended (their ``cell.pid`` is still there): kill what is
left of their sessions, run their cleanup records (:mod:`engine.cleanup`; Ray's with a short
grace), and remove the runner's scratch folders; it notes what it did in each ``cell.pid``
(the next runner still records the attempt as killed, and says the guard stopped it) and in
a ``cleanup`` event of ``runner.jsonl``, then exits. After a runner that ended normally
nothing of that kind is left and the guard exits at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.cleanup import run_recorded
from engine.processes import engine_env
from engine.runfolder import RunFolder
from engine.runner.cellproc import kill_recorded_session, remove_scratch
from engine.runner.records import read_record, write_record

#: Seconds a cleanup handler waits between SIGTERM and SIGKILL when the guard runs it: the
#: runner is gone, nothing waits for a graceful end, and the whole clean-up must finish
#: within seconds of the runner's death.
GUARD_GRACE_S = 0.5


class Guard:
    """The runner's side: the guard process and the write end of its pipe.

    The guard is watched (:meth:`watch`): one killed while its runner runs is noticed at
    once (a thread waits on it) and replaced by a new guard, so that a runner killed after
    its guard still leaves nothing behind (issue 43).
    """

    def __init__(self, proc: subprocess.Popen | None, fd: int | None):
        self.proc, self._fd = proc, fd
        self.run_dir: Path | None = None
        self._released = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @classmethod
    def start(cls, run_dir: Path) -> Guard:
        """Start the guard of this runner for ``run_dir``. A guard that cannot be started
        (no process left to fork) is no reason to refuse the campaign: then :attr:`pid`
        is None and the next runner cleans up, as before guards."""
        guard = cls(*cls._spawn(run_dir))
        guard.run_dir = run_dir
        return guard

    @staticmethod
    def _spawn(run_dir: Path) -> tuple[subprocess.Popen | None, int | None]:
        """A guard process and the write end of its pipe; (None, None) when none starts."""
        read, write = os.pipe()  # both ends close-on-exec: no cell inherits the write end
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.runner.guard", str(run_dir), str(os.getpid())],
                stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=engine_env(), start_new_session=True)
        except OSError:
            os.close(write)
            return None, None
        finally:
            os.close(read)
        return proc, write

    def watch(self, tell: Callable[[str], None]) -> None:
        """Replace the guard whenever it dies before :meth:`release` (a ``kill -9``, the
        OOM killer), telling ``tell`` one line each time. The new guard takes over
        unchanged: what it cleans up is found on disk by the runner's pid. A guard that
        cannot be started again is said as well (the next runner cleans up then)."""
        if self.proc is None:
            return
        threading.Thread(target=self._watch, args=(tell,), name="guard-watch",
                         daemon=True).start()

    def _watch(self, tell: Callable[[str], None]) -> None:
        while True:
            proc = self.proc
            if proc is None:
                return
            code = proc.wait()  # at once when it dies: well within 0.5 s
            with self._lock:
                if self._released or self.run_dir is None:
                    return
                old_fd = self._fd
                self.proc, self._fd = self._spawn(self.run_dir)
                new = self.proc
                if old_fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(old_fd)
            how = f"signal {-code}" if code < 0 else f"exit status {code}"
            if new is None:
                line = (f"the runner's guard (pid {proc.pid}) ended ({how}) and could not be "
                        "started again: if the runner is killed now, what its cells started "
                        "outside their sessions stays until the next --resume")
            else:
                line = (f"the runner's guard (pid {proc.pid}) ended ({how}); a new guard "
                        f"(pid {new.pid}) took over")
            with contextlib.suppress(Exception):
                tell(line)

    def release(self) -> None:
        """The runner ends: close the pipe (the guard finds nothing left and exits)."""
        with self._lock:
            self._released = True
            if self._fd is not None:
                fd, self._fd = self._fd, None
                with contextlib.suppress(OSError):
                    os.close(fd)


def clean_after(run_dir: Path, runner_pid: int) -> list[str]:
    """Stop what runner ``runner_pid`` left of the attempts it ran in ``run_dir`` and
    remove its scratch folders. Returns one line per thing done (empty when nothing was
    left). Each step is attempted whatever the others did."""
    messages: list[str] = []
    for attempt in RunFolder(run_dir).all_attempts():
        record = read_record(attempt.pid)
        if record is None:
            continue
        if record.get("runner_pid") != runner_pid:
            continue
        killed = kill_recorded_session(record)
        done = [f"killed pids {killed}"] if killed else []
        done += run_recorded(attempt.path, grace_s=GUARD_GRACE_S)
        record["guard"] = {"pid": os.getpid(), "at": time.time(), "did": done}
        with contextlib.suppress(OSError):
            write_record(attempt.pid, record)
        messages += [f"{attempt.path.parent.name}/{attempt.path.name}: {m}" for m in done]
    # A cluster = "local" campaign's Ray runtime (engine.runner.cluster): its record is in
    # a folder of the run folder named after its runner.
    local = run_dir / f"cluster-local-{runner_pid}"
    if any((local / "cleanup").glob("*.json")):
        messages += [f"{local.name}: {m}"
                     for m in run_recorded(local, grace_s=GUARD_GRACE_S)]
    messages += [f"removed {p}" for p in remove_scratch(runner_pid)]
    return messages


def _log(run_dir: Path, runner_pid: int, messages: list[str]) -> None:
    """What the guard did, as a ``cleanup`` event of the campaign's runner log."""
    from engine.events import EventWriter

    with contextlib.suppress(OSError, ValueError):
        writer = EventWriter(RunFolder(run_dir).runner_log, campaign=run_dir.name)
        writer.emit("cleanup", messages=messages, guard=True, runner_pid=runner_pid)
        writer.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run_dir, runner_pid = Path(argv[0]), int(argv[1])
    for sig in (signal.SIGINT, signal.SIGHUP):  # the runner's terminal is not ours to obey
        signal.signal(sig, signal.SIG_IGN)
    try:
        while os.read(0, 4096):  # nothing is ever sent: EOF is the runner's end
            pass
    except OSError:
        pass
    messages = clean_after(run_dir, runner_pid)
    if messages and run_dir.is_dir():  # a node agent's staging run folder went with its
        _log(run_dir, runner_pid, messages)  # scratch: its log is not written back
    return 0


def describe(record: dict[str, Any]) -> str:
    """``; its guard cleaned up 0.4 s later: killed pids [1, 2], ray: stopped 5 Ray
    process(es) of fr-x`` for a ``cell.pid`` record the guard annotated; "" otherwise."""
    guard = record.get("guard")
    if not isinstance(guard, dict):
        return ""
    did = ", ".join(str(d) for d in guard.get("did") or []) or "nothing was left running"
    return f"; its guard cleaned up: {did}"


if __name__ == "__main__":
    sys.exit(main())
