"""Follow a campaign from its files: the runner's ``runner.jsonl`` and every attempt's
``events.jsonl``, merged into one ordered stream. Torch-free.

Front ends (``--batch``, the dashboard, replay) read the campaign only through this, so a
front end that starts late or restarts sees the same events as one that watched from the
start. Per cell the order is exact; between a cell's own events and the runner's events
about it, the runner's ``cell_started`` comes first and its end event (done, failed,
killed) last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from engine.event_types import (
    RunnerCampaignStarted,
    RunnerCellStarted,
    RunnerDone,
    RunnerFailed,
    RunnerKilled,
)
from engine.events import Event, EventTail, last_line_of
from engine.runfolder import RunFolder

END_EVENTS = frozenset({"done", "failed", "killed"})
#: The runner's events that end an attempt (the types of :data:`END_EVENTS`).
_END = (RunnerDone, RunnerFailed, RunnerKilled)


class CampaignFollower:
    """``poll()`` returns the events that appeared since the previous call, typed
    (:mod:`engine.event_types`; each is also the read-only dict of its JSON line).

    ``offset`` is where to start in ``runner.jsonl`` (a runner appends a new session to the
    same file each time it runs a campaign): 0 replays every session, and
    :func:`last_session_offset` finds the latest.

    An attempt's file is read at each poll while the attempt runs, then for
    ``retire_after_s`` (``clock`` seconds) after the runner's end event for it, until a poll
    finds nothing new: every poll read every attempt's file ever started, so a long
    campaign's follower (the dashboard's, four polls a second) cost more and more
    (issue 47, item 2). ``reads`` counts the attempt files read by all polls.
    """

    def __init__(self, run_dir: str | Path, offset: int = 0, retire_after_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.run_dir = Path(run_dir)
        self.runner = EventTail(RunFolder(self.run_dir).runner_log, offset)
        self.cells: dict[tuple[str | None, int | None], EventTail] = {}
        self.reads = 0
        self._retire_after_s = retire_after_s
        self._clock = clock
        #: Ended attempts still read: when their end event came (``clock``).
        self._ended: dict[tuple[str | None, int | None], float] = {}

    def poll(self) -> list[Event]:
        out: list[Event] = []
        now = self._clock()
        for key, tail in list(self.cells.items()):
            self.reads += 1
            new = list(tail.read())
            out.extend(new)
            ended = self._ended.get(key)
            if not new and ended is not None and now - ended >= self._retire_after_s:
                del self.cells[key], self._ended[key]  # its writers are gone: read no more
        for event in self.runner.read():
            if isinstance(event, RunnerCellStarted) and event.events is not None:
                event = self._located(event)
                out.append(event)
                tail = self.cells[(event.cell, event.attempt)] = EventTail(event["events"])
                out.extend(tail.read())
            elif isinstance(event, _END) and (event.cell, event.attempt) in self.cells:
                # the cell's last words come first
                self.reads += 1
                out.extend(self.cells[(event.cell, event.attempt)].read())
                out.append(event)
                self._ended[(event.cell, event.attempt)] = now
            else:
                out.append(event)
        return out


    def _located(self, event: RunnerCellStarted) -> RunnerCellStarted:
        """``event`` with its attempt's files (``events``, ``log_path``) as they are found
        from this process (:meth:`engine.runfolder.RunFolder.recorded`): the runner wrote
        them relative to its own working directory, or where a moved run folder was."""
        folder = RunFolder(self.run_dir)
        fixed = {key: str(folder.recorded(event[key])) for key in ("events", "log_path")
                 if isinstance(event.get(key), str) and event[key]}
        return RunnerCellStarted.of({**event, **fixed})


def last_session_offset(run_dir: str | Path) -> int:
    """Byte offset of the last ``campaign_started`` line of ``runner.jsonl`` (0 if none)."""
    return last_line_of(RunFolder(Path(run_dir)).runner_log, RunnerCampaignStarted.TYPE)
