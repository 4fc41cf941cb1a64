"""The runner's own files, read and written in one place (torch-free).

The runner side keeps JSON at its file boundary: the cell spec is
:class:`engine.cell.protocol.CellRunSpec`, events are the classes of
:mod:`engine.event_types`, and the runner's own records are read and written here, never
parsed ad hoc by the modules that use them (an import-linter contract in pyproject.toml:
only the protocol modules of engine.runner, engine.cell and engine.observe import
``json``).

- ``cell.pid`` in an attempt folder (:func:`write_cell_pid`): the session a cell runs in,
  while it runs (``pid``, ``sid``, ``runner_pid``, ``host``, ``started`` epoch seconds,
  ``create_time`` of the process as psutil gives it, ``start``: ``spawn`` | ``zygote``;
  the guard adds ``guard`` when it cleaned up after a dead runner).
- ``runner.pid`` in a run folder (:func:`write_runner_record`): ``pid``, ``host``,
  ``started``, ``argv`` of the runner holding the campaign.
- ``campaign.resolved.json``: what actually runs, after overrides (indent 1).
- ``agent.json`` in an attempt folder of a cluster campaign: the node agent that runs it.

Every write is whole or absent (:func:`write_whole`); every read answers None for a file
that is missing, torn or not a JSON object (a record being written, a foreign file).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

#: The node agent's record of a cluster attempt, in the attempt folder.
AGENT_RECORD = "agent.json"


def write_whole(path: Path, text: str) -> None:
    """``path`` with ``text``, whole or not at all (a temporary file, then ``os.replace``);
    an ``OSError`` names ``path`` even where the failed write named no file (a write to a
    full disk names none)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def read_record(path: Path) -> dict[str, Any] | None:
    """A record as its JSON object, or None (missing, unreadable, torn, not an object)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Rewrite a record whole (the guard's note on a cell's record). Raises OSError."""
    write_whole(Path(path), json.dumps(record))


def cell_pid_record(pid: int, how: str, create_time: float | None) -> dict[str, Any]:
    """The record of a cell that this runner just started (its session is its pid)."""
    return {"pid": pid, "sid": pid, "runner_pid": os.getpid(), "host": socket.gethostname(),
            "started": time.time(), "create_time": create_time, "start": how}


def write_runner_record(path: Path, started: float, argv: list[str]) -> None:
    """``runner.pid``: this process holds the campaign since ``started`` (epoch s)."""
    write_whole(path, json.dumps({"pid": os.getpid(), "host": os.uname().nodename,
                                  "started": started, "argv": argv}))


def write_resolved_campaign(path: Path, doc: dict[str, Any]) -> None:
    """``campaign.resolved.json`` (indent 1; values JSON cannot hold written as text)."""
    write_whole(path, json.dumps(doc, indent=1, default=str))


def write_agent_record(path: Path, node: str, node_host: str, pid: int) -> None:
    """``agent.json``: the node agent of this runner runs the attempt's cell ``pid``."""
    write_whole(path, json.dumps({"runner_pid": os.getpid(), "host": socket.gethostname(),
                                  "node": node, "node_host": node_host, "pid": pid,
                                  "started": time.time()}))


def identity_key(identity: dict[str, Any]) -> str:
    """One text per machine identity, whatever its keys' order (the class of a node)."""
    return json.dumps(identity, sort_keys=True)
