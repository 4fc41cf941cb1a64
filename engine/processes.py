"""Plumbing every process the engine starts shares, torch-free: a child that dies with its
parent (the kernel's parent-death signal), a parent that adopts its orphaned descendants
(a child subreaper, how the runner becomes the parent of a cell its zygote forked), and the
environment that makes a child run this same engine. Used by the runner for cells, by cells
for their monitor and workers, and by the front ends for the runner."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

import engine

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where it is not available (not Linux) or refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel for ``sig`` when this process's parent dies (``PR_SET_PDEATHSIG``).
    The caller checks ``os.getppid()`` afterwards: a parent that died before the call sends
    nothing. False where the kernel offers no such signal."""
    return _prctl(_PR_SET_PDEATHSIG, sig)


def set_child_subreaper(on: bool) -> bool:
    """Make this process adopt its orphaned descendants (``PR_SET_CHILD_SUBREAPER``) or stop
    doing so: a descendant whose parent exits is re-parented to the nearest living ancestor
    that is a subreaper instead of init. The runner is one only while a cell is handed over
    from its zygote (:mod:`engine.runner.zygote`). False where this is not available."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0)


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL):
    """preexec_fn: ask the kernel for ``sig`` (SIGKILL by default) when the parent dies; exit
    if it already has. A child that can finish cleanly (the monitor) asks for SIGTERM."""
    def apply() -> None:
        set_death_signal(sig)  # not Linux: the pid record still lets us clean up
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)
    return apply


def engine_env() -> dict[str, str]:
    """This environment with this engine first on ``PYTHONPATH``, so a child process runs
    the same engine as its parent (a checkout, an editable or a regular install alike)."""
    env = dict(os.environ)
    root = str(Path(engine.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def session_processes(leader_pid: int, session_id: int) -> list:
    """The leader, its descendants, and every process still in its session (a grandchild
    re-parented to init stays in the session): the cell's processes as the runner's
    watchdog and clean-up find them, and as :mod:`engine.measure.cores` counts their CPU.
    A list of ``psutil.Process``; empty when the leader is gone and nothing is left."""
    import psutil

    found: dict[int, psutil.Process] = {}
    try:
        leader = psutil.Process(leader_pid)
        found[leader.pid] = leader
        for child in leader.children(recursive=True):
            found[child.pid] = child
    except psutil.NoSuchProcess:
        pass
    for proc in psutil.process_iter():
        try:
            if proc.pid not in found and os.getsid(proc.pid) == session_id:
                found[proc.pid] = proc
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return list(found.values())
