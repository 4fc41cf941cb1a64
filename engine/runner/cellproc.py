"""Starting and stopping cell processes. Torch-free.

A cell is a fresh ``python -m engine.cell`` process, leader of its own session (so a signal
to the session reaches everything it started), stdin from /dev/null, output to its log, and
a parent-death signal: if the runner dies, even by SIGKILL, the kernel kills the cell
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``). Processes the cell started in its session without a
death signal of their own are found and killed by the next runner from the ``cell.pid``
record (:func:`reap_leftovers`).
"""

from __future__ import annotations

import json
import os
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
from engine.runner.watchdog import session_processes

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


def start_cell(spec_path: Path, log_path: Path, env: dict[str, str]) -> subprocess.Popen:
    """Start ``python -m engine.cell SPEC`` in a new session and record its pid and session
    in ``cell.pid`` beside the spec (removed by :func:`forget` when the attempt ends). Its
    processes register their stack dumps in the attempt's ``stacks/`` (:mod:`engine.stacks`)."""
    folder = AttemptFolder(spec_path.parent)
    folder.stacks.mkdir(exist_ok=True)
    env = {**env, stacks.STACKS_ENV: str(folder.stacks)}
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.cell", str(spec_path)], stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=die_with_parent(os.getpid()))
    record = {"pid": proc.pid, "sid": proc.pid, "runner_pid": os.getpid(),
              "host": socket.gethostname(), "started": time.time(),
              "create_time": _create_time(proc.pid)}
    folder.pid.write_text(json.dumps(record))
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


def stop_session(session_id: int, leader: subprocess.Popen | None = None,
                 grace: float = TERM_GRACE_S) -> list[int]:
    """SIGTERM every process of the session, wait up to ``grace`` s, SIGKILL survivors, and
    verify that none is left. Returns the pids that had to be SIGKILLed; raises
    ``RuntimeError`` if anything survives SIGKILL (a process in uninterruptible sleep)."""
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
    _, still = psutil.wait_procs(alive, timeout=grace)
    survivors = [p.pid for p in still] + [p.pid for p in session_processes(session_id, session_id)
                                          if _alive(p)]
    if survivors:
        raise RuntimeError(f"processes {sorted(set(survivors))} of session {session_id} "
                           "survived SIGKILL")
    return killed


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
    kill whatever of their sessions is still alive, and return their records (with
    ``attempt_dir`` and ``killed`` pids) so the caller can record them."""
    found = []
    for record_path in [a.pid for a in RunFolder(run_dir).all_attempts() if a.pid.exists()]:
        try:
            record = json.loads(record_path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if record.get("runner_pid") == os.getpid():
            continue
        killed = []
        if record.get("host") == socket.gethostname():
            sid = record["sid"]
            for proc in session_processes(sid, sid):
                try:
                    if os.getsid(proc.pid) != sid:
                        continue  # a reused pid that is not ours
                    proc.kill()
                    killed.append(proc.pid)
                except (psutil.Error, ProcessLookupError):
                    continue
        record["attempt_dir"] = record_path.parent
        record["killed"] = killed
        found.append(record)
        record_path.unlink(missing_ok=True)
    return found
