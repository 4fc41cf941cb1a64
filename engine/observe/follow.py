"""Follow a campaign from its files: the runner's ``runner.jsonl`` and every attempt's
``events.jsonl``, merged into one ordered stream. Torch-free.

Front ends (``--batch``, the dashboard, replay) read the campaign only through this, so a
front end that starts late or restarts sees the same events as one that watched from the
start. Per cell the order is exact; between a cell's own events and the runner's events
about it, the runner's ``cell_started`` comes first and its end event (done, failed,
killed) last.
"""

from __future__ import annotations

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
    """

    def __init__(self, run_dir: str | Path, offset: int = 0):
        self.run_dir = Path(run_dir)
        self.runner = EventTail(RunFolder(self.run_dir).runner_log, offset)
        self.cells: dict[tuple[str | None, int | None], EventTail] = {}

    def poll(self) -> list[Event]:
        out: list[Event] = []
        for tail in self.cells.values():
            out.extend(tail.read())
        for event in self.runner.read():
            if isinstance(event, RunnerCellStarted) and event.events is not None:
                out.append(event)
                tail = self.cells[(event.cell, event.attempt)] = EventTail(event.events)
                out.extend(tail.read())
            elif isinstance(event, _END) and (event.cell, event.attempt) in self.cells:
                # the cell's last words come first
                out.extend(self.cells[(event.cell, event.attempt)].read())
                out.append(event)
            else:
                out.append(event)
        return out


def last_session_offset(run_dir: str | Path) -> int:
    """Byte offset of the last ``campaign_started`` line of ``runner.jsonl`` (0 if none)."""
    return last_line_of(RunFolder(Path(run_dir)).runner_log, RunnerCampaignStarted.TYPE)
