"""The runner's control channel: command files dropped into ``<run folder>/control/``.

Files, not a socket: nothing to bind, no 107-byte path limit, works across hosts sharing the
run folder, and a command sent while no runner is running waits for the next one (a runner
discards commands older than its own start). Each command is one JSON file written to a
temporary name and renamed into place, so the runner never reads half a command. Torch-free.

Commands: ``kill CELL`` (stop the running attempt; recorded killed, not retried),
``retry CELL`` (stop it if running, then run it again now; does not consume the campaign's
``retries`` budget), ``skip CELL`` (do not run a queued cell; stop it if running),
``abort`` (stop the running cell and end the campaign; it names no cell). ``CELL`` is a cell
key, a unique key prefix, or the cell's index in the campaign.

A cell reference means the same to ``fugue-tui control`` (which refuses one no cell answers
to) and to the runner (which applies it): both go through :func:`resolve_cell`. An index is
written in one form only, ASCII decimal without sign, spaces or leading zeros (``12``);
``str.isdigit`` and ``int`` accept superscripts, other scripts' digits, ``+1`` or ``01``,
and a command meant for one cell must not reach another. A number written any other way is
no index: it can still be a key prefix (keys are hexadecimal, so ``01`` may be one); when
no key starts with it, the one-line refusal names the index's one form.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, OutputError, shown
from engine.event_types import (
    RunnerCampaignStarted,
    RunnerCellStarted,
    RunnerQueued,
    RunnerSkipped,
)
from engine.events import EventTail
from engine.observe.follow import last_session_offset
from engine.runfolder import RunFolder

COMMANDS = ("kill", "retry", "skip", "abort")

#: An index in its one form. ``[0-9]``, not ``\d``: ``\d`` matches every script's digits.
_INDEX = re.compile(r"0|[1-9][0-9]*")
#: What a key prefix can be: cell keys are lowercase hexadecimal (engine.define.matrix).
_KEY_PREFIX = re.compile(r"[0-9a-f]+")


def resolve_cell(ref: str, total: int, keys: Iterable[str]) -> int | list[str]:
    """What the cell reference ``ref`` names among ``total`` cells with the known ``keys``:
    its index (1..``total``) when ``ref`` is an index in its one form (see the module
    docstring), else the keys it is a prefix of (sorted, without repeats; several: an
    ambiguous prefix; none: no such cell). An empty ``ref`` names nothing. The one rule of
    ``fugue-tui control``'s check and of the runner (:meth:`engine.runner.supervisor.Runner.find`)."""
    if _INDEX.fullmatch(ref) and 1 <= int(ref) <= total:
        return int(ref)
    return sorted({key for key in keys if key.startswith(ref)}) if ref else []


def _index_written_otherwise(ref: str) -> str:
    """For a reference that names no cell: when it is a number written in another form
    (``01``, ``+1``, `` 1``, ``١``, ``¹``), the words saying the index's one form; else ""."""
    text = ref.strip()
    try:
        number = int(text)  # accepts signs, spaces, leading zeros, "1_0", Unicode digits
    except ValueError:
        digits = [unicodedata.digit(c, None) for c in text]
        if not text or None in digits:
            return ""
        number = int("".join(str(d) for d in digits))  # superscripts: isdigit, not int
    if _INDEX.fullmatch(ref):
        return ""  # its one form already: out of range, said by the caller
    form = f"; did you mean {number}?" if number >= 1 else ""
    return (f": {shown(ref)} is not an index (an index is written in ASCII digits without "
            f"sign, spaces or leading zeros{form})")


def send(run_dir: str | Path, command: str, cell: str | None = None,
         reason: str | None = None, pid: int | None = None, process: str = "") -> Path:
    """Queue a command for the runner of ``run_dir``; return the command file. ``reason``
    (abort only): who stopped the campaign, recorded as the running cell's kill reason
    (the dashboard's Stop says so instead of a Ctrl-C nobody typed). ``pid`` and
    ``process`` (kill only): the cell's process the user chose to kill (the dashboard's
    process view) and its command line; the runner kills the cell's attempt and names
    them in its records (:func:`engine.runner.commands.stop_reason`).

    Raises:
        ConfigError: unknown command, a missing cell, no such run folder, or a cell that
            the campaign's last runner session does not have (an index out of range, a key
            prefix that matches no cell or several).
        OutputError: the command file cannot be written (``control`` is not a folder, a
            read-only or full disk); nothing is left behind.
    """
    run_dir = Path(run_dir)
    check_command(run_dir, command, cell)
    inbox = RunFolder(run_dir).control
    body = {"cmd": command, "cell": cell, "ts": time.time(), "sender_pid": os.getpid()}
    if reason and command == "abort":
        body["reason"] = str(reason)
    if pid is not None and command == "kill":
        body["pid"], body["process"] = int(pid), str(process)[:120]
    name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
    tmp = inbox / f".{name}.tmp"
    created = not os.path.lexists(inbox)
    try:
        inbox.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(body))
        os.replace(tmp, inbox / name)
    except OSError as exc:  # a file in the inbox's place, a read-only or full disk
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                inbox.rmdir()
        why = ("not a directory" if isinstance(exc, FileExistsError)
               else exc.strerror or str(exc))
        raise OutputError(f"{inbox}: cannot queue the command: {why}") from None
    return inbox / name


def check_command(run_dir: str | Path, command: str, cell: str | None = None) -> None:
    """Refuse a command :func:`send` could not queue for the runner: an unknown command, a
    missing cell, no run folder, a cell the campaign does not have.

    Raises:
        ConfigError: one line naming what is wrong.
        OutputError: ``control`` is there but not a folder.
    """
    run_dir = Path(run_dir)
    if command not in COMMANDS:
        raise ConfigError(f"unknown control command '{command}'; known: {', '.join(COMMANDS)}")
    if command != "abort" and not cell:
        raise ConfigError(f"control command '{command}' needs a cell (key, key prefix or index)")
    if command == "abort" and cell is not None:  # it would be dropped: say so instead
        raise ConfigError(f"control abort takes no cell (it stops the running cell and ends "
                          f"the campaign); got {shown(cell)}")
    if not RunFolder(run_dir).runner_log.exists():
        raise ConfigError(f"{run_dir}: not a campaign run folder (no runner.jsonl)")
    if cell:
        check_cell(run_dir, command, str(cell))
    inbox = RunFolder(run_dir).control
    if os.path.lexists(inbox) and not inbox.is_dir():  # told before "no runner" (exit 1)
        raise OutputError(f"{inbox}: cannot queue the command: not a directory")


def campaign_cells(run_dir: str | Path) -> tuple[int, dict[int, str]] | None:
    """``(number of cells, {index: cell key})`` of the campaign's last runner session, from
    its ``runner.jsonl`` (the runner announces every cell as queued or skipped when it
    starts); None before any runner started."""
    path = RunFolder(Path(run_dir)).runner_log
    events = list(EventTail(path, last_session_offset(run_dir)).read())
    started = next((e for e in events if isinstance(e, RunnerCampaignStarted)), None)
    if started is None or not isinstance(started.cells, int):
        return None
    keys = {e.index: str(e.cell) for e in events
            if isinstance(e, (RunnerQueued, RunnerSkipped, RunnerCellStarted))
            and isinstance(e.index, int) and e.cell}
    return started.cells, keys


def check_cell(run_dir: str | Path, command: str, ref: str) -> None:
    """Refuse a cell reference that the runner could not resolve: the rule of
    :func:`resolve_cell` (the runner's), against the cells of the campaign's last runner
    session; before any runner started, a reference that is neither an index nor a
    possible key prefix.

    Raises:
        ConfigError: one line naming ``ref`` (quoted), and the index's one form when ``ref``
            is a number written another way, and the valid range.
    """
    known = campaign_cells(run_dir)
    if known is None:  # no runner has started yet: the keys are not known
        if _INDEX.fullmatch(ref) or _KEY_PREFIX.fullmatch(ref):
            return
        raise ConfigError(f"control {command}: no cell {shown(ref)} in {run_dir}"
                          f"{_index_written_otherwise(ref)} (a cell is named by its index, "
                          f"or by its key or a key prefix: hexadecimal digits)")
    total, keys = known
    found = resolve_cell(ref, total, keys.values())
    if isinstance(found, int) or len(found) == 1:
        return
    if not found and len(keys) < total and _KEY_PREFIX.fullmatch(ref):
        return  # cells whose keys the event log does not list: the runner tells
    valid = (f"an index from 1 to {total}, or a cell key or unique key prefix" if total
             else "the campaign has no cells")
    if found:
        raise ConfigError(f"control {command}: cell key prefix {shown(ref)} matches "
                          f"{len(found)} cells of {run_dir}; give more characters "
                          f"({valid})")
    raise ConfigError(f"control {command}: no cell {shown(ref)} in {run_dir}"
                      f"{_index_written_otherwise(ref)} ({valid})")


def waiting_cell(run_dir: str | Path, ref: str) -> tuple[int, str] | None:
    """``(index, key)`` of the cell ``ref`` names when the campaign's last runner session
    has it queued and not started since (its last event is ``queued``); None when it has
    started, finished, or cannot be told from the event log. A ``retry`` for such a cell is
    refused by ``fugue-tui control``: the runner would only apply it once the cell runs —
    stopping the attempt it had just started and running it again, a pointless killed row."""
    path = RunFolder(Path(run_dir)).runner_log
    try:
        events = list(EventTail(path, last_session_offset(run_dir)).read())
    except OSError:
        return None
    total = next((e.cells for e in events if isinstance(e, RunnerCampaignStarted)), None)
    last: dict[str, str] = {}
    index_of: dict[str, int] = {}
    for e in events:
        key = e.get("cell")
        if not isinstance(key, str) or not key:
            continue
        if isinstance(e.get("index"), int):
            index_of[key] = e["index"]
        last[key] = str(e.get("type"))
    found = resolve_cell(ref, total if isinstance(total, int) else 0, last)
    keys = [k for k, i in index_of.items() if i == found] if isinstance(found, int) else found
    if len(keys) != 1 or last.get(keys[0]) != "queued":
        return None
    return index_of.get(keys[0], 0), keys[0]


class Inbox:
    """The runner's side: commands in arrival order, each consumed once."""

    def __init__(self, run_dir: Path, since: float):
        self.dir = RunFolder(run_dir).control
        self.dir.mkdir(parents=True, exist_ok=True)
        self.since = since

    def poll(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.dir.glob("[0-9]*.json")):
            try:
                body = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            finally:
                path.unlink(missing_ok=True)
            if body.get("ts", 0) >= self.since and body.get("cmd") in COMMANDS:
                out.append(body)
        return out


def runner_state(run_dir: str | Path) -> bool | None:
    """Whether a runner is running the campaign of ``run_dir``: True (its ``runner.pid``
    names a live ``engine.runner`` process on this host), False (no ``runner.pid``: the
    runner removes it when it ends; or its process is gone), None (a runner on another
    host sharing the folder: this host cannot tell, the command is queued for it)."""
    import socket

    import psutil

    try:
        info = json.loads(RunFolder(Path(run_dir)).runner_pid.read_text())
        pid = int(info["pid"])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return None  # being written, or unreadable: do not refuse on a guess
    if info.get("host") not in (None, socket.gethostname(), os.uname().nodename):
        return None
    try:
        proc = psutil.Process(pid)
        return (proc.status() != psutil.STATUS_ZOMBIE
                and "engine.runner" in " ".join(proc.cmdline()))
    except psutil.Error:
        return False
