"""Resources a cell starts outside its own session (an MPS control daemon detaches; a Ray
runtime may), recorded in the run folder so the runner can stop them after any end of the
cell: success, failure, watchdog kill, SIGKILL of the cell, Ctrl-C, or a runner that died
(the next runner finds the records). Torch-free.

An executor calls :func:`record` right after starting such a resource and :func:`release`
after stopping it cleanly. The runner calls :func:`run_recorded` after every attempt and,
for attempts of earlier runners, when it starts. Each record names a handler
(``module:function``, called with the record's ``info`` dict, returning a one-line message
of what it did); a handler must only stop what the record identifies as ours (a pid *and*
something unique to the cell such as its private pipe directory or a per-cell tag), never
something found by name alone.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
from pathlib import Path
from typing import Any

FOLDER = "cleanup"
#: Handlers recorded by earlier versions, before the executors' code moved into packages: a
#: run folder left by such a runner (a crash, a SIGKILL) must still be cleaned by this one.
LEGACY_HANDLERS = {
    "engine.mps:quit_recorded_daemon": "engine.executors.mp.mps:quit_recorded_daemon",
    "engine.raytools:cleanup_handler": "engine.executors.ray.runtime:cleanup_handler",
}


def record(attempt_dir: str | Path, name: str, handler: str, **info: Any) -> Path:
    """Write ``<attempt_dir>/cleanup/<name>.json`` atomically (tmp + ``os.replace``)."""
    folder = Path(attempt_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"handler": handler, "info": info}, default=str))
    os.replace(tmp, path)
    return path


def release(attempt_dir: str | Path, name: str) -> None:
    """The resource was stopped cleanly: forget its record."""
    (Path(attempt_dir) / FOLDER / f"{name}.json").unlink(missing_ok=True)


def run_recorded(attempt_dir: str | Path, grace_s: float | None = None) -> list[str]:
    """Call the handler of every record left in ``attempt_dir``; return their messages.

    ``grace_s`` (when given) reaches each handler as ``info["grace_s"]``: how long it may
    wait between SIGTERM and SIGKILL (short when the runner is already gone).
    A record whose handler fails stays on disk (so a later runner may try again) and its
    message says why; the others are removed.
    """
    messages = []
    for path in sorted((Path(attempt_dir) / FOLDER).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            handler = LEGACY_HANDLERS.get(doc["handler"], doc["handler"])
            module, _, func = handler.partition(":")
            info = dict(doc.get("info", {}))
            if grace_s is not None:
                info["grace_s"] = grace_s
            message = getattr(importlib.import_module(module), func)(info)
            path.unlink(missing_ok=True)
            messages.append(f"{path.stem}: {message}")
        except Exception as exc:  # keep the record; report and go on with the others
            traceback.print_exc()
            messages.append(f"{path.stem}: cleanup failed: {type(exc).__name__}: {exc}")
    return messages


#: The optional companion of a record's handler, in the same module: ``processes(info)``
#: returns the live processes (``psutil.Process``) the record identifies.
PROCESSES_FUNCTION = "recorded_processes"


def recorded_processes(attempt_dir: str | Path) -> list:
    """The live processes the attempt's records identify, for handlers whose module offers
    :data:`PROCESSES_FUNCTION` (a Ray runtime's; an MPS daemon serves the device, not the
    cell, and offers none): what the monitor counts as the cell's besides its session
    (:mod:`engine.measure.cores`). A record that cannot be read or resolved adds nothing:
    this is a measurement, the clean-up itself reports such records."""
    found: list = []
    for path in sorted((Path(attempt_dir) / FOLDER).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            handler = LEGACY_HANDLERS.get(doc["handler"], doc["handler"])
            module = importlib.import_module(handler.partition(":")[0])
            processes = getattr(module, PROCESSES_FUNCTION, None)
            if processes is not None:
                found += processes(dict(doc.get("info", {})))
        except Exception:  # a half-written or foreign record: nothing to count
            continue
    return found
