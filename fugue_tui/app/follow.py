"""The run screen's thread workers (no widget access): following a run folder live, and
replaying a recorded one. Each polls every :data:`POLL_S` until its worker is cancelled and
reaches the screen only through :class:`~fugue_tui.app.messages.Followed` messages; what it
reads of the screen (the log to tail, whether to sample the host, the runner's handle) are
plain attributes the UI thread sets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fugue_tui.app.messages import Followed
from fugue_tui.app.widgets.log_pane import LogTail

if TYPE_CHECKING:
    from textual.message import Message
    from textual.worker import Worker

    from fugue_tui.app.models.replay import Replay
    from fugue_tui.app.process import RunnerHandle

#: Seconds between two reads of the event files by the follow worker.
POLL_S = 0.25
#: Seconds between host samples while no cell runs.
HOST_POLL_S = 1.0


class FollowTarget(Protocol):
    """What the workers read of the run screen (plain attributes the UI thread sets) and
    the one thing they call on it (``post_message``, thread-safe)."""

    run_dir: Path
    event_offset: int
    log_target: str | None
    idle_poll: bool
    handle: RunnerHandle | None
    replay: Replay | None

    def post_message(self, message: Message) -> bool: ...


def follow_run(screen: FollowTarget, worker: Worker[Any]) -> None:
    """Follow ``screen.run_dir`` from ``screen.event_offset``: the campaign's events, the
    tail of ``screen.log_target``, the runner's liveness and, while ``screen.idle_poll``,
    host samples."""
    from engine.observe.follow import CampaignFollower
    from fugue_tui.app.models.run import freeze_heap
    from fugue_tui.app.models.series import HostPoller

    freeze_heap("app")  # the app is up: its imports and widgets out of every collection
    follower = CampaignFollower(screen.run_dir, screen.event_offset)
    log = LogTail()
    poller: HostPoller | None = None
    last_alive: bool | None = None
    next_host = 0.0
    while not worker.is_cancelled:
        events = follower.poll()
        target = screen.log_target
        lines, reset = log.read(target)
        alive = screen.handle.alive() if screen.handle is not None else False
        host = None
        # while the runner lives: the host bar shows the host (and the idle charts while
        # nothing runs); a finished campaign's screen is not about the host now
        if (alive or screen.idle_poll) and time.monotonic() >= next_host:
            poller = poller or HostPoller(devices=True)
            host = poller.sample()
            next_host = time.monotonic() + HOST_POLL_S
        if events or lines or reset or alive != last_alive or host:
            screen.post_message(Followed(events, lines, reset, target, alive, host))
            last_alive = alive
        time.sleep(POLL_S)


def replay_run(screen: FollowTarget, worker: Worker[Any]) -> None:
    """Post ``screen.replay``'s due events as :class:`Followed` messages (as live)."""
    from engine.events import parse_event

    replay = screen.replay
    assert replay is not None, "replay_run follows a replay"
    log = LogTail()
    while not worker.is_cancelled:
        # Typed as live events are (a replay read from files already holds typed events,
        # returned as they are; one built from plain dicts gets typed copies).
        generation, due = replay.due_tagged()
        events = [parse_event(e) for e in due]
        target = screen.log_target
        lines, reset = log.read(target)
        if events or lines or reset:
            screen.post_message(Followed(events, lines, reset, target, False,
                                         generation=generation))
        time.sleep(POLL_S)
