"""Starting and stopping cell processes. Torch-free.

A cell is a ``python -m engine.cell`` process, forked by the runner's zygote (a pre-warmed
parent that imported torch once: :mod:`engine.runner.zygote`) or spawned as a fresh
interpreter, and either way the runner's child, leader of its own session (so a signal to
the session reaches everything it started), stdin from /dev/null, output to its log, and a
parent-death signal: if the runner dies, even by SIGKILL, the kernel kills the cell
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``). Processes the cell started in its session without a
death signal of their own, what it recorded for cleanup and its scratch folder are stopped
and removed by the runner's guard within seconds of the runner's death
(:mod:`engine.runner.guard`), else by the next runner from the ``cell.pid`` record
(:func:`reap_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from engine import stacks
from engine.processes import die_with_parent, engine_env
from engine.runfolder import STACKS, AttemptFolder, RunFolder
from engine.runner.records import cell_pid_record, read_record, write_record
from engine.runner.watchdog import session_processes
from engine.runner.zygote import ForkedCell, Zygote, ZygoteError

#: Seconds between SIGTERM and SIGKILL when a cell's session is stopped.
TERM_GRACE_S = 5.0


def cell_env(scratch: Path, threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The cell's environment: a fresh TorchInductor/Triton cache (compile warm-up is
    measured cold), the thread count for OpenMP/MKL, and this engine on the path."""
    env = engine_env()
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
    env["TRITON_CACHE_DIR"] = str(scratch / "triton")
    env["PYTHONUNBUFFERED"] = "1"
    n = str(threads or os.cpu_count() or 1)
    env["OMP_NUM_THREADS"] = n
    env["MKL_NUM_THREADS"] = n
    env.update(extra or {})
    return env


def start_cell(spec_path: Path, log_path: Path, env: dict[str, str],
               zygote: Zygote | None = None) -> subprocess.Popen | ForkedCell:
    """Start the cell of ``spec_path`` in a new session and record its pid and session in
    ``cell.pid`` beside the spec (removed by :func:`forget` when the attempt ends). Its
    processes register their stack dumps in the attempt's ``stacks/`` (:mod:`engine.stacks`).

    With a ready ``zygote`` the cell is forked from it (:mod:`engine.runner.zygote`: the
    same session, stdin, log, environment and parent-death signal as a spawned one); without
    one, or when the zygote fails (the failure is in ``zygote.broken``), it is ``python -m
    engine.cell SPEC``, a fresh interpreter. Returns the process: a :class:`ForkedCell`
    when the zygote forked it (``cell.pid``'s ``start`` says ``zygote`` or ``spawn``).

    Raises:
        OSError: naming the file that could not be written: ``cell.log`` (opened for the
            cell's output) or ``cell.pid``; a cell whose record could not be written is
            killed at once (no later runner could find it) and no partial record stays.
    """
    folder = AttemptFolder(spec_path.parent)
    folder.stacks.mkdir(exist_ok=True)
    env = {**env, stacks.STACKS_ENV: str(folder.stacks)}
    proc: subprocess.Popen | ForkedCell | None = None
    how = "spawn"
    with open(log_path, "ab") as out:
        if zygote is not None and not zygote.broken:
            with contextlib.suppress(ZygoteError):  # then the old way, below
                proc, how = zygote.fork([str(spec_path)], out.fileno(), env), "zygote"
        if proc is None:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cell", str(spec_path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=die_with_parent(os.getpid()))
    record = cell_pid_record(proc.pid, how, _create_time(proc.pid))
    pid_path = folder.pid
    try:
        write_record(pid_path, record)
    except OSError:
        if isinstance(proc, ForkedCell):
            proc.withdraw()  # it exits without running; killed below all the same
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the session it leads: nothing may stay
        proc.wait()
        raise
    if isinstance(proc, ForkedCell):
        proc.go()  # recorded: now it may run
    return proc


def forget(attempt_dir: Path) -> None:
    """The attempt no longer runs: its pid record goes, and so do the stack files that no
    dump was written into."""
    folder = AttemptFolder(attempt_dir)
    folder.pid.unlink(missing_ok=True)
    stacks.prune(folder.stacks)


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def stop_session(session_id: int, leader: subprocess.Popen | ForkedCell | None = None,
                 grace: float = TERM_GRACE_S) -> list[int]:
    """SIGTERM every process of the session, wait up to ``grace`` s, SIGKILL survivors, and
    verify that none is left (a zombie counts as gone: it runs nothing). Returns the pids
    that had to be SIGKILLed; raises ``RuntimeError`` naming each process still running
    ``grace`` s after its SIGKILL, with its state (a process in uninterruptible sleep)."""
    procs = session_processes(session_id, session_id)
    for proc in procs:
        _signal(proc, signal.SIGTERM)
    if leader is not None:
        try:
            leader.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace if leader is None else 0.5)
    # A process that exited but is not reaped yet (a zombie waiting for an init that reaps
    # late) is gone: it needs no SIGKILL and must not be reported as needing one.
    alive = [p for p in alive if _alive(p)]
    if alive and leader is not None:  # the rest of the session gets the full grace too
        _, alive = psutil.wait_procs(alive, timeout=grace)
        alive = [p for p in alive if _alive(p)]
    killed = []
    for proc in alive:
        killed.append(proc.pid)
        _signal(proc, signal.SIGKILL)
    if leader is not None:
        try:
            leader.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # Until the grace is over: whatever of the session still runs gets SIGKILL too (one
    # forked while we signalled). A process that exited but is not reaped yet (a zombie of
    # an init that reaps late, a Ray worker whose raylet died) survived nothing; one still
    # there after the grace is named with the state it is in (disk sleep: blocked in I/O).
    deadline = time.monotonic() + grace
    while True:
        left = {p.pid: p for p in [*alive, *session_processes(session_id, session_id)]
                if _alive(p)}
        if not left or time.monotonic() >= deadline:
            break
        for pid, proc in left.items():
            if pid not in killed:
                killed.append(pid)
                _signal(proc, signal.SIGKILL)
        time.sleep(0.05)
    if left:
        raise RuntimeError(f"processes {_describe(left.values())} of session {session_id} "
                           f"still running {grace:g} s after SIGKILL")
    return killed


def _describe(procs) -> str:
    """``123 (python, disk-sleep), 456 (raylet, running)``: pid, name and state now."""
    out = []
    for proc in sorted(procs, key=lambda p: p.pid):
        try:
            out.append(f"{proc.pid} ({proc.name()}, {proc.status()})")
        except psutil.Error:
            out.append(f"{proc.pid} (gone)")
    return ", ".join(out)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass


def dump_stacks(attempt_dir: Path, session_id: int, wait: float = 1.0) -> str:
    """Ask every Python process of a cell for a stack dump of all its threads: each one
    that registered in the attempt's ``stacks/`` (:mod:`engine.stacks`: the cell, its
    monitor, mp workers, Ray workers) and is still the process that registered (its start
    time matches: never a reused pid) gets :data:`~engine.stacks.DUMP_SIGNAL` and writes its
    file; wait up to ``wait`` s for them all. Python processes of the cell's session with
    no handler are not signalled (the signal would kill them) but named.

    Returns one line for the cell's log (beside which ``stacks/`` is): the files written,
    the processes that did not answer (stopped, or in uninterruptible sleep) and those
    without a handler."""
    folder = AttemptFolder(attempt_dir).stacks
    asked, registered = [], set()
    for reg in stacks.registered(folder):
        registered.add(reg.pid)
        try:
            proc = psutil.Process(reg.pid)
            if reg.started is not None and abs(proc.create_time() - reg.started) > 0.05:
                continue  # the pid was reused: not ours to signal
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            os.kill(reg.pid, stacks.DUMP_SIGNAL)
        except (psutil.Error, ProcessLookupError):
            continue
        asked.append(reg)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not all(reg.dumped for reg in asked):
        time.sleep(0.05)
    time.sleep(0.05)  # a dump being written when the last file grew
    written = [f"{STACKS}/{reg.path.name}" for reg in asked if reg.dumped]
    silent = [f"{reg.role} pid {reg.pid}" for reg in asked if not reg.dumped]
    unhandled = [f"pid {proc.pid} ({_command(proc)})"
                 for proc in session_processes(session_id, session_id)
                 if proc.pid not in registered and _runs_python(proc)]
    parts = [f"stack dumps (beside this log): {', '.join(written) or 'none'}"]
    if silent:
        parts.append(f"no answer from {', '.join(silent)}")
    if unhandled:
        parts.append(f"Python processes without a dump handler: {', '.join(unhandled)}")
    return "; ".join(parts)


def _runs_python(proc: psutil.Process) -> bool:
    try:
        return os.path.basename(proc.exe()).startswith("python")
    except psutil.Error:
        return False


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(" ".join(proc.cmdline()).split())[:120] or proc.name()
    except psutil.Error:
        return "?"


def reap_leftovers(run_dir: Path) -> list[dict[str, Any]]:
    """Find attempts of earlier runners that never ended (their ``cell.pid`` is still there),
    kill whatever of their sessions is still alive, remove those runners' scratch folders,
    and return their records (with ``attempt_dir`` and ``killed`` pids) so the caller can
    record them."""
    found = []
    for record_path in [a.pid for a in RunFolder(run_dir).all_attempts() if a.pid.exists()]:
        record = read_record(record_path)
        if record is None:
            continue
        if record.get("runner_pid") == os.getpid():
            continue
        record["attempt_dir"] = record_path.parent
        record["killed"] = kill_recorded_session(record)
        if isinstance(record.get("runner_pid"), int) and record.get("host") == socket.gethostname():
            remove_scratch(record["runner_pid"])
        found.append(record)
        record_path.unlink(missing_ok=True)
    return found


def kill_recorded_session(record: dict[str, Any], wait: float = 2.0) -> list[int]:
    """SIGKILL what is left of the session a ``cell.pid`` record names (on this host; a
    reused pid in another session is left alone) and wait up to ``wait`` s for it to go.
    Returns the pids killed."""
    if record.get("host") != socket.gethostname() or not isinstance(record.get("sid"), int):
        return []
    sid = record["sid"]
    killed = []
    for proc in session_processes(sid, sid):
        try:
            if os.getsid(proc.pid) != sid:
                continue  # a reused pid that is not ours
            proc.kill()
            killed.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    deadline = time.monotonic() + wait
    while any(_alive(p) for p in killed) and time.monotonic() < deadline:
        time.sleep(0.05)  # a zombie is gone: it runs nothing (its reaper may be slow)
    return [p.pid for p in killed]


#: The cell's scratch folders (TorchInductor and Triton caches): ``<tmp>/fugue-cell-<runner
#: pid>-XXXXXXXX``, so what a dead runner left can be found by its pid alone.
SCRATCH_PREFIX = "fugue-cell-"


def scratch_prefix(runner_pid: int | None = None) -> str:
    """The ``tempfile.mkdtemp`` prefix of the scratch folders of runner ``runner_pid``
    (this process by default)."""
    return f"{SCRATCH_PREFIX}{runner_pid or os.getpid()}-"


def remove_scratch(runner_pid: int) -> list[Path]:
    """Remove runner ``runner_pid``'s scratch folders (real folders only, never a link);
    return those removed."""
    import tempfile

    removed = []
    for path in Path(tempfile.gettempdir()).glob(scratch_prefix(runner_pid) + "*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
