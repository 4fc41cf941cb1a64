"""What the run screen's stack-dump key shows for the selected running cell: the stack of
every thread of each of its Python processes, its process tree and its last events.
Textual-free; call :func:`cell_report` from a worker thread (it waits up to ``wait`` s for
the dumps).

The dumps are the watchdog's own (:func:`engine.runner.cellproc.dump_stacks`): every
process of the cell that registered a handler (:mod:`engine.stacks`: the cell, its
monitor, mp workers, Ray workers) writes the stacks of all its threads into the attempt's
``stacks/`` folder, beside the cell's log, where they stay. Asking does not stop the cell.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

#: Events of the cell shown under the dumps (its latest).
LAST_EVENTS = 12


def cell_report(attempt_dir: Path, pid: int, label: str, wait: float = 1.0) -> str:
    """The report of the cell attempt in ``attempt_dir`` whose process is ``pid`` (it
    leads its own session): dumps, process tree, last events, as plain text."""
    from engine import stacks
    from engine.runfolder import AttemptFolder
    from engine.runner.cellproc import dump_stacks

    folder = AttemptFolder(attempt_dir)
    before = {reg.path: reg.size for reg in stacks.registered(folder.stacks)}
    summary = dump_stacks(attempt_dir, pid, wait=wait)
    lines = [f"{label}: {time.strftime('%H:%M:%S')} · {summary}", ""]
    lines += ["process tree (pid, CPU s, RSS MiB, state, command):"]
    lines += process_tree(pid) or ["  (the cell's process is gone)"]
    for reg in stacks.registered(folder.stacks):
        text = _new_text(reg.path, before.get(reg.path, reg.size))
        if text.strip():
            lines += ["", f"── {reg.role} pid {reg.pid} ({reg.path.name}) " + "─" * 20,
                      *text.rstrip().splitlines()]
    lines += ["", f"last {LAST_EVENTS} events of the cell (its monitor's samples left out):"]
    lines += last_events(folder.events) or ["  (none yet)"]
    return "\n".join(lines)


def _new_text(path: Path, offset: int) -> str:
    """What was written to ``path`` after byte ``offset`` (this dump, not earlier ones)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def process_tree(pid: int) -> list[str]:
    """``pid`` and its descendants, one indented line each."""
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return []
    out: list[str] = []

    def walk(proc: psutil.Process, depth: int) -> None:
        try:
            with proc.oneshot():
                cpu = sum(proc.cpu_times()[:2])
                rss = proc.memory_info().rss / 2**20
                status = proc.status()
                command = " ".join(" ".join(proc.cmdline()).split())[:100] or proc.name()
            children = proc.children()
        except psutil.Error:
            return
        out.append(f"  {'  ' * depth}{proc.pid:>7}  {cpu:7.1f}  {rss:7.0f}  {status:<8} "
                   f"{command}")
        for child in children:
            walk(child, depth + 1)

    walk(root, 0)
    return out


def last_events(path: Path, n: int = LAST_EVENTS) -> list[str]:
    """The last ``n`` lifecycle and progress events of an events file, one line each:
    time, type, the rest. The monitor's samples are left out: a sample a second filled the
    list and hid what the cell last did (issue 47); the file is read backwards, at most
    :data:`TAIL_BYTES` of it, until ``n`` are found."""
    from engine.event_table import MONITOR, source_of

    out = []
    for event in reversed(_tail_events(path, n, lambda e: source_of(e) != MONITOR)):
        stamp = time.strftime("%H:%M:%S", time.localtime(event.get("ts") or 0))
        rest = {k: v for k, v in event.items()
                if k not in ("v", "ts", "type", "cell", "attempt", "campaign")}
        out.append(f"  {stamp} {event.get('type')} {json.dumps(rest, default=str)[:110]}")
    return out


#: How much of an events file :func:`last_events` reads at most, from its end: a
#: cell hung for an hour has about 3,600 samples (about 1 MiB) after its last progress.
TAIL_BYTES = 4 * 2**20
_CHUNK = 64 * 1024


def _tail_events(path: Path, n: int, keep: Callable[[dict[str, Any]], bool]
                 ) -> list[dict[str, Any]]:
    """Up to ``n`` events of ``path`` that ``keep`` accepts, newest first."""
    found: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as fh:
            pos = end = fh.seek(0, 2)
            head = b""  # the cut first line of the chunk read last: completed by the next
            while pos > 0 and end - pos < TAIL_BYTES and len(found) < n:
                step = min(_CHUNK, pos)
                pos -= step
                fh.seek(pos)
                lines = (fh.read(step) + head).split(b"\n")
                head = lines.pop(0) if pos > 0 else b""
                for raw in reversed(lines):
                    try:
                        event = json.loads(raw)
                    except ValueError:
                        continue  # an empty or torn last line
                    if isinstance(event, dict) and keep(event):
                        found.append(event)
                        if len(found) == n:
                            break
    except OSError:
        return found
    return found
