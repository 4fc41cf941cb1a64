"""One attempt of one cell, from its spec on disk to its verdict. Torch-free.

The runner (:mod:`engine.runner.supervisor`) decides *which* attempt runs and its
placement strategy (:mod:`engine.runner.strategy`) makes it; an :class:`Attempt` runs it:
writes ``spec.json`` and the pre-allocated reason file, starts
``python -m engine.cell`` in a session of its own with a fresh scratch folder, forwards the
cell's events, lets the watchdog and the control channel stop it, then cleans up what the
cell left (its session, cleanup records, the scratch folder) and says what happened:
ok, failed (with the cell's own one line where it left one) or killed (with why).

An attempt never sees the runner: it gets its spec and a :class:`Crew` (the journal it
writes events and rows through, the source of the stops asked for it, the zygote handle,
the campaign's settings, the hook that says it started).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from engine.cell.protocol import EXIT_OUTPUT, REASON_BYTES, CellRunSpec, read_reason
from engine.cleanup import run_recorded
from engine.errors import OutputError
from engine.event_base import ABSENT
from engine.event_types import (
    CellDone,
    CellFailed,
    MonitorSample,
    RunnerCellStarted,
    RunnerCleanup,
    RunnerDone,
    RunnerFailed,
    RunnerHung,
    RunnerKilled,
    RunnerLeftoversKilled,
    RunnerResumed,
    RunnerSuspect,
)
from engine.events import EVENTS, EventTail
from engine.registry import EXECUTORS
from engine.results.values import new_group_id
from engine.runner.cellproc import (
    dump_stacks,
    forget,
    scratch_prefix,
    start_cell,
    stop_session,
)
from engine.runner.journal import Journal
from engine.runner.reasons import MemoryTrail, exit_reason, last_line
from engine.runner.records import write_whole
from engine.runner.stopped import StopClock
from engine.runner.warmstart import WarmStart
from engine.runner.watchdog import PackedDevices, Watchdog, WatchdogSettings
from engine.runner.zygote import ForkedCell

if TYPE_CHECKING:
    from engine.define.matrix import CellSpec
    from engine.runfolder import AttemptFolder

#: Seconds between two looks at a running cell (events, commands, watchdog).
POLL_S = 0.1
#: Below this many free bytes the runs folder's disk counts as full (a cell that could not
#: write its output and could not say why is then reported as a full disk).
LOW_SPACE_BYTES = 1 << 20

#: What ended the campaign, for the killed cell's reason (set by the runner's signal handler).
INTERRUPTED_BY = ["Ctrl-C"]


class Aborted(Exception):
    """The control channel asked to abort the campaign."""


class StopSource(Protocol):
    """Where a running attempt learns that it must stop (:class:`engine.runner.commands.Commands`)."""

    def stop_for(self, cell: CellSpec) -> tuple[str, str] | None:
        """``(what next, reason)`` when ``cell`` must stop: what next ``"stop"``,
        ``"retry"`` or ``"abort"``; None: it goes on."""
        ...


@dataclass(frozen=True)
class AttemptSettings:
    """What an attempt applies of its campaign: the watchdog's settings, the runs folder
    (its disk is named when a cell could not write), the campaign's id and ``threads``
    (0: each cell's share; a cluster node's attempt resolves it there)."""

    watchdog: WatchdogSettings
    runs_dir: Path
    campaign_id: str
    threads: int = 0


@dataclass(frozen=True)
class Crew:
    """What every attempt of a campaign works with (never the runner itself)."""

    #: Where its events and its rows go (and the cell's events, forwarded).
    journal: Journal
    #: The stops asked for it (control commands).
    stops: StopSource
    #: The runner's zygote, when cells start from one.
    warm: WarmStart
    settings: AttemptSettings
    #: Called once the attempt's process runs (its start time; concurrency records).
    started: Callable[[Attempt], None]


class Attempt:
    """Attempt ``number`` of ``cell`` (see the module docstring): its ``folder``, the
    ``spec`` it starts with, its ``crew``, and ``env(scratch)``, the environment of its
    process with compile caches in ``scratch`` (its device the only one CUDA sees)."""

    def __init__(self, cell: CellSpec, number: int, folder: AttemptFolder, spec: CellRunSpec,
                 crew: Crew, env: Callable[[Path], dict[str, str]]):
        self.cell, self.number, self.folder, self.crew, self.env = cell, number, folder, crew, env
        self.journal, self.settings = crew.journal, crew.settings
        #: The spec (what the cell reads from ``spec.json``; what failed rows are built from).
        #: The group id is drawn here, not by the cell: the row the runner writes for a cell
        #: it killed (or that died) then names the same group as the cell's samples file.
        self.spec: CellRunSpec = replace(spec, group_id=new_group_id(cell.executor))
        self.dir = self.folder.path
        self.log_path = self.folder.log
        #: The cell's ``failed`` event (its one-line error), once it sent one.
        self.failure: CellFailed | None = None
        #: The monitor's ``sample`` events so far: the last, the peak RSS, the lowest memory
        #: available (the figures of a cell killed from outside, the OOM killer's victim).
        self.memory = MemoryTrail()
        #: When the runner decided to run this attempt (``time.perf_counter``): the start of
        #: its ``start_s`` and of the bench's fixed cost.
        self.decided = time.perf_counter()
        #: The same moment on the wall clock (control commands carry time.time() stamps).
        self.decided_wall = time.time()

    def run(self) -> tuple[str, str, Path, str]:
        """Run the attempt to its end: (status, error, log path, what next: "" | "retry" |
        "stop"). Raises :class:`Aborted` on an abort command, ``KeyboardInterrupt`` after
        stopping and recording the cell, :class:`OutputError` when output cannot be written."""
        scratch = self._prepare()
        tail = EventTail(self.spec.events, hold=True)  # the file the cell writes, not the path
        tail.opened()
        try:
            return self._run(scratch, tail)
        finally:
            tail.close()

    def _run(self, scratch: Path, tail: EventTail) -> tuple[str, str, Path, str]:
        """:meth:`run` once the attempt's folder is ready and its events file held."""
        cell, attempt = self.cell, self.number
        spec, attempt_dir, log_path = self.spec, self.dir, self.log_path
        proc, how = self._start(scratch)
        self.crew.started(self)
        watchdog = self._watchdog(proc)
        try:
            if self.zygote_lost is not None:
                self.crew.warm.failed(self.zygote_lost)
            self.journal.emit(RunnerCellStarted(
                cell=cell.key, index=cell.index, label=cell.label, attempt=attempt,
                events=spec.events, log_path=str(log_path), pid=proc.pid,
                start=how,
                start_s=round(time.perf_counter() - self.decided, 4),
                device=spec.placement if spec.placement else ABSENT))
            written, verdict, after = self._supervise(proc, tail, watchdog)
        except KeyboardInterrupt:
            self.stop(proc, f"interrupted ({INTERRUPTED_BY[0]})", dump=False)
            self.forward(tail, None)
            self.cleanup()
            forget(attempt_dir)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        except BaseException:  # the runner cannot go on (its own write failed): no cell stays
            with contextlib.suppress(Exception):
                stop_session(proc.pid, proc)
            with contextlib.suppress(Exception):
                self.cleanup()
            with contextlib.suppress(OSError):
                forget(attempt_dir)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        written |= self.forward(tail, None)
        leftovers: Sequence[int | str] = []
        if verdict is None:  # the leader exited by itself: nothing of its session may stay
            try:
                leftovers = stop_session(proc.pid, None, grace=1.0)
            except RuntimeError as exc:
                leftovers = [str(exc)]
        self.cleanup()
        forget(attempt_dir)
        shutil.rmtree(scratch, ignore_errors=True)
        said_there = read_reason(self.folder.reason)
        if not said_there:  # kept only when the cell left its reason there
            with contextlib.suppress(OSError):
                self.folder.reason.unlink(missing_ok=True)
        if after == "abort":
            raise Aborted()
        if verdict is not None:  # "" (watchdog kill: retries apply), "stop" or "retry"
            return "killed", verdict, log_path, after
        # it exited by itself (the loop saw it): wait() returns its status at once
        return self._exited(proc.wait(), written, said_there, leftovers)

    def _prepare(self) -> Path:
        """The attempt's folder with its spec, the reason file's reserved blocks, and a
        scratch folder for the cell (returned). When any of it cannot be written, the
        attempt's folder is removed again: an attempt that never ran leaves no empty
        ``spec.json`` for a later runner to stumble on."""
        spec_path, reason_file = self.folder.spec, self.folder.reason
        try:
            with _writing(spec_path):
                self.dir.mkdir(parents=True)
                write_whole(spec_path, self.spec.to_json())
            with _writing(reason_file):  # blocks the cell's last line can reuse
                reason_file.write_bytes(b" " * REASON_BYTES)
            # The events file exists before the cell starts, so the runner's tail holds the
            # very file the cell appends to (O_APPEND on the same inode), even if the path
            # is replaced by rename before its first look.
            with _writing(Path(self.spec.events)):
                Path(self.spec.events).touch()
            with _writing(Path(tempfile.gettempdir())):
                return Path(tempfile.mkdtemp(prefix=scratch_prefix()))
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _start(self, scratch: Path) -> tuple[subprocess.Popen | ForkedCell, str]:
        """The cell process, started on the campaign's device, forked by the runner's
        zygote when it has one, else spawned (its scratch folder and the attempt's folder
        removed when it cannot start: it never ran). Returns it and how it began
        (``zygote`` or ``spawn``), which also goes into the spec (``cell_start``: the rows
        the runner writes for this attempt say it too; not into ``spec.json``, written
        before)."""
        warm = self.crew.warm
        zygote = warm.zygote
        try:
            with _writing(self.log_path):  # start_cell's OSError names cell.pid where that failed
                env = self.env(scratch)
                if zygote is None:
                    proc = start_cell(self.folder.spec, self.log_path, env)
                else:
                    with warm.lock:  # one request at a time on the zygote's socket
                        proc = start_cell(self.folder.spec, self.log_path, env, zygote=zygote)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        #: The zygote when it failed this start (said in run(), where a failing write stops
        #: the cell that started the old way instead).
        self.zygote_lost = zygote if zygote is not None and zygote.broken else None
        how = "zygote" if isinstance(proc, ForkedCell) else "spawn"
        self.spec = replace(self.spec, cell_start=how)
        return proc, how

    def _watchdog(self, proc) -> Watchdog:
        """The cell's watchdog: the campaign's settings, with the CPU its executor's runtime
        keeps busy when jobs hang added. Device utilisation comes from the cell's own
        monitor samples (never a second NVML sampler on the device); a cell on a GPU whose
        samples say nothing about it has an unknown device signal, not an idle one."""
        settings = self.settings.watchdog
        idle = EXECUTORS.get(self.cell.executor).idle_cpu_fraction
        if idle:
            settings = replace(settings, cpu_fraction=settings.cpu_fraction + idle)
        # A several-device campaign's lanes record the UUID they were given (GPU-…/MIG-…),
        # not cuda:N: those are GPU cells too, and must get the device signal.
        on_gpu = str(self.spec.device_requested or self.spec.device).startswith(
            ("cuda", "GPU-", "MIG-"))
        # A packed cell (mp/ray devices: UUIDs by now) is watched on each of its devices.
        others = [u for u in self.cell.options.get("devices") or []
                  if u != self.spec.gpu_uuid]
        return Watchdog(settings, proc.pid, proc.pid, has_device=on_gpu,
                        packed=PackedDevices(others) if others else None)

    def _supervise(self, proc, tail: EventTail, watchdog: Watchdog
                   ) -> tuple[bool, str | None, str]:
        """Forward the cell's events, obey control commands and apply the watchdog until the
        cell exits or is stopped. Returns (its group row was written, the stop's verdict or
        None when it exited by itself, what next after a command)."""
        key, attempt, emit = self.cell.key, self.number, self.journal.emit
        settings = self.settings.watchdog
        written, hung, after, verdict = False, False, "", None
        clock = StopClock(self.dir, proc.pid)  # stopped_s: time its processes were stopped
        while proc.poll() is None:
            clock.check()
            written |= self.forward(tail, watchdog)
            command = self.crew.stops.stop_for(self.cell)
            if command:
                verdict = self.stop(proc, command[1], dump=False)
                after = command[0]
                break
            if watchdog.due():
                check = watchdog.check()
                if check.state == "ok" and hung:
                    hung = False
                    emit(RunnerResumed(cell=key, attempt=attempt))
                elif check.state == "suspect" and check.strikes == settings.suspect_after:
                    emit(RunnerSuspect(cell=key, attempt=attempt, seen=check.describe()))
                elif check.state == "hung" and not hung:
                    hung = True
                    emit(RunnerHung(cell=key, attempt=attempt, seen=check.describe(),
                                    action=settings.action))
                    if settings.action == "kill":
                        verdict = self.stop(proc, f"hung: {check.describe()}",
                                             dump=True)
                        break
            time.sleep(POLL_S)
        return written, verdict, after

    def _exited(self, code: int, written: bool, said_there: str,
                leftovers: Sequence[int | str]) -> tuple[str, str, Path, str]:
        """The outcome of a cell that exited by itself with ``code``: its status and error
        (the cell's own line first), the failed row recorded when the cell wrote none, the
        runner's events; a cell that could not write its output stops the campaign."""
        journal, cell, attempt, spec, log_path = (self.journal, self.cell, self.number,
                                                   self.spec, self.log_path)
        said = (self.failure.error if self.failure is not None else None) or ""
        if code == 0:
            status, error = "ok", ""
        elif code == EXIT_OUTPUT:  # the cell's own one line (it names the file) comes first
            status = "failed"
            error = (said or said_there or last_line(log_path)
                     or _unwritable(self.settings.runs_dir, code, log_path))
        else:
            status = "failed"
            error = exit_reason(code, said or said_there, log_path, self.memory)
        try:
            if status != "ok" and not written and not journal.has_row(spec):
                journal.record(spec, "failed", error)  # may raise: the runner's own line
            if leftovers:  # the pids, or the line saying what could not be stopped
                journal.emit(RunnerLeftoversKilled(cell=cell.key, attempt=attempt,
                                                   pids=list(leftovers)))
            ended = RunnerDone if status == "ok" else RunnerFailed
            journal.emit(ended(cell=cell.key, attempt=attempt, exit_code=code, error=error))
        except OutputError as exc:
            if code == EXIT_OUTPUT:
                raise
            # The disk does not allow recording the cell's end: the one line says it.
            told = f"{status}: {error}" if error else status
            raise OutputError(f"{exc} (cell {cell.index} {cell.label} attempt {attempt} "
                              f"ended {told}; not recorded; {STOPPED})") from None
        if code == EXIT_OUTPUT:  # every later cell would fail the same way
            raise OutputError(f"{error} (while cell {cell.index} {cell.label} ran; {STOPPED})")
        return status, error, log_path, ""

    def cleanup(self) -> None:
        """Stop what the cell started outside its session (``engine.cleanup``)."""
        messages = run_recorded(self.dir)
        if messages:
            self.journal.emit(cleanup_event(self.cell.key, self.number, messages))

    def stop(self, proc, reason: str, dump: bool) -> str:
        """Stop a running attempt's whole session and record it as killed."""
        if dump:  # every Python process's stacks, named in the cell's log
            _append_line(self.log_path, f"fugue-tui runner: {dump_stacks(self.dir, proc.pid)}")
        try:
            forced = stop_session(proc.pid, proc)
            if forced:
                reason += f" (SIGKILL needed for pids {forced})"
        except RuntimeError as exc:
            reason += f"; {exc}"
        self.journal.ended(self.spec, RunnerKilled(cell=self.cell.key, attempt=self.number,
                                                   reason=reason, exit_code=proc.returncode))
        return reason

    def forward(self, tail: EventTail, watchdog: Watchdog | None) -> bool:
        """Pass new cell events on; True if the cell says it wrote its group row. The cell's
        ``failed`` event (its one-line error) is kept in :attr:`failure`."""
        written = False
        for event in tail.read():
            if isinstance(event, (CellDone, CellFailed)):
                written |= bool(event.group_written)
            if isinstance(event, CellFailed):
                self.failure = event
            elif isinstance(event, MonitorSample):
                self.memory.add(event)
            if watchdog is not None and event.type in EVENTS.progress:
                watchdog.progress()
            elif watchdog is not None and isinstance(event, MonitorSample):
                watchdog.sample(event)
            self.journal.forward(event)
        return written


def cleanup_event(cell: str, attempt: int, messages: list[str]) -> RunnerCleanup:
    """The ``cleanup`` event of an attempt."""
    return RunnerCleanup(cell=cell, attempt=attempt, messages=messages)


@contextlib.contextmanager
def _writing(path: Path):
    """An ``OSError`` inside becomes an :class:`OutputError` naming the file (the error's
    own file name, else ``path``) and the reason: one line, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{exc.filename or path}: {exc.strerror or exc}") from exc


#: How a campaign stopped by unwritable output ends its one line.
STOPPED = "the campaign stopped: make room, then run it again with --resume"


def _append_line(path: Path, line: str) -> None:
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _unwritable(runs_dir: Path, code: int, log_path: Path) -> str:
    """Why a cell that exited with :data:`EXIT_OUTPUT` failed, when neither its event nor
    its log could say: a full disk under the runs folder if there is next to no room."""
    try:
        free = shutil.disk_usage(runs_dir).free
    except OSError:
        free = None
    if free is not None and free < LOW_SPACE_BYTES:
        return (f"{runs_dir}: {os.strerror(errno.ENOSPC)} ({free} bytes free; the cell could "
                f"not write its output, exit status {code})")
    return f"cell exited with status {code}: it could not write its output (see {log_path})"
