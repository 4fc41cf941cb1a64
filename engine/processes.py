"""Plumbing every process the engine starts shares, torch-free: a child that dies with its
parent (the kernel's parent-death signal), and the environment that makes a child run this
same engine. Used by the runner for cells, by cells for their monitor and workers, and by
the front ends for the runner."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

import engine

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL):
    """preexec_fn: ask the kernel for ``sig`` (SIGKILL by default) when the parent dies; exit
    if it already has. A child that can finish cleanly (the monitor) asks for SIGTERM."""
    def apply() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the pid record still lets us clean up
            pass
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
