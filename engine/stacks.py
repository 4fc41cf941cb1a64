"""Stack dumps of every Python process of a cell, for the runner's watchdog. Torch-free.

Before killing a hung cell the runner asks each of the cell's Python processes for the
stack of every thread (:mod:`faulthandler`, whose handler is C code: it answers even when
the process is blocked in a system call or holds the GIL in a C extension). A process can
only be asked if it registered a handler first — ``SIGUSR2``'s default action would kill it —
so every process the engine runs for a cell registers one with :func:`install`, naming its
role: the cell itself (``cell``), its monitor sidecar (``monitor``), each mp worker
(``mp-worker``) and mp's pre-warmed parent (``mp-parent``), each Ray worker that trains (``ray-worker``: pool actors and Tune trials,
in the cell's private Ray runtime, or in a cluster's workers on this host).

Registration is a file, ``<attempt>/stacks/<role>-<pid>.txt``, in the folder the runner
names in ``$FUGUE_STACKS_DIR`` (every process of the cell inherits it): its first line says
who registered (role, pid, the process's start time, against a reused pid), and the dump is
written below it. The runner finds the processes to ask by listing the folder, asks them,
and afterwards deletes the files nobody wrote a dump into (:func:`prune`). Without the
variable (a cell run by hand, a Ray worker on another host), dumps go to stderr as before.

``SIGUSR2``, not ``SIGUSR1``: Ray Tune's driver (the cell of a Ray hpo cell) installs its
own SIGUSR1 handler, which would end the Tune run instead of dumping it.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: The environment variable naming the attempt's stacks folder (set by the runner).
STACKS_ENV = "FUGUE_STACKS_DIR"
#: The signal that asks a registered process for a dump.
DUMP_SIGNAL = signal.SIGUSR2
#: Files kept open for faulthandler (it writes to their descriptors from its handler).
_OPEN: list[IO[str]] = []


def stack_file(role: str) -> IO[str]:
    """This process's registration file in ``$FUGUE_STACKS_DIR`` (header written), or
    ``sys.stderr`` when there is no such folder or it cannot be written."""
    folder = os.environ.get(STACKS_ENV)
    if not folder or not os.path.isdir(folder):
        return sys.stderr
    pid = os.getpid()
    try:
        import psutil

        started = psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - the dump is worth more than the guard
        started = None
    try:
        handle = open(Path(folder) / f"{role}-{pid}.txt", "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        handle.write(header(role, pid, started))
        handle.flush()
    except OSError:
        return sys.stderr
    _OPEN.append(handle)
    return handle


def install(role: str) -> None:
    """Register this process's stack dump on :data:`DUMP_SIGNAL` (see the module
    docstring). Call it early in the process's entry, once."""
    faulthandler.register(DUMP_SIGNAL, file=stack_file(role), all_threads=True)


def header(role: str, pid: int, started: float | None) -> str:
    return "# " + json.dumps({"role": role, "pid": pid, "started": started}) + "\n"


@dataclass(frozen=True)
class Registration:
    """A process that registered a dump file: its ``role``, ``pid``, start time (``psutil``'s
    ``create_time``; None when unknown), the file and its size now."""

    path: Path
    role: str
    pid: int
    started: float | None
    size: int

    @property
    def dumped(self) -> bool:
        """Whether anything was written below the header."""
        try:
            return self.path.stat().st_size > self.size
        except OSError:
            return False


def registered(folder: Path) -> list[Registration]:
    """The registrations in ``folder`` (files whose first line is not a header are
    ignored), sorted by file name."""
    out = []
    for path in sorted(Path(folder).glob("*.txt")) if Path(folder).is_dir() else []:
        try:
            with open(path, encoding="utf-8") as fh:
                first = fh.readline()
            doc = json.loads(first[2:]) if first.startswith("# {") else None
            size = path.stat().st_size
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("pid"), int):
            out.append(Registration(path, str(doc.get("role")), doc["pid"], doc.get("started"),
                                    size))
    return out


def prune(folder: Path) -> None:
    """Delete the registration files that hold no dump (only their header), and the folder
    when nothing is left in it."""
    folder = Path(folder)
    for reg in registered(folder):
        try:
            with open(reg.path, "rb") as fh:
                fh.readline()
                empty = not fh.read(1)
        except OSError:
            continue
        if empty:
            reg.path.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:  # holds dumps (or never existed)
        pass
