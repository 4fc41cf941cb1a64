"""Replay a finished campaign in the run screen, as it happened. Textual-free.

A replay is the event stream a live dashboard would have read — the latest runner session
of a run folder through :class:`engine.observe.follow.CampaignFollower`, or an events file (one
JSON event per line, runner and cell events merged in the order a follower yields them, as
:func:`write_stream` writes it) — released by a clock that runs on the events' own ``ts``:
``speed`` seconds of campaign time per second of wall time, paused, stepped one event at a
time, or run to the end. The run screen feeds what is due into the same ``Followed``
message and state as live events, and uses :meth:`Replay.clock` as its clock, so elapsed
times and ETAs read as they did then.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import FugueError
from engine.event_base import Event
from engine.events import parse_event
from engine.runfolder import RunFolder

#: Replay speeds offered by faster/slower (campaign seconds per wall second): one 1-2-5
#: ladder, so each step is about twice the last (the old one jumped 100 → 500, started at
#: 0.25, and a speed given off the ladder could not be returned to).
SPEEDS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)

#: ``[`` / ``]`` move a 20th of the campaign, never less than 10 s of campaign time.
SEEK_STEPS = 20
SEEK_MIN_S = 10.0


def parse_time(text: str) -> float:
    """A seek prompt's answer: campaign time from the start, ``m:ss``, ``h:mm:ss`` or seconds
    (``75``, ``1:15``, ``0:01:15``), in seconds.

    Raises:
        ValueError: one line naming the value and the forms taken.
    """
    import math

    parts = text.strip().split(":")
    try:
        if not 1 <= len(parts) <= 3 or any(not p.strip() for p in parts):
            raise ValueError
        values = [float(p) for p in parts]
        if len(parts) > 1 and (any(v != int(v) for v in values[:-1])
                               or any(v >= 60 for v in values[1:])):
            raise ValueError
    except ValueError:
        values = [math.nan]
    seconds = sum(v * 60 ** i for i, v in enumerate(reversed(values)))
    if not (math.isfinite(seconds) and seconds >= 0 and min(values) >= 0):
        # one line of the 80-column dialog
        raise ValueError(f"not a time: {text.strip()[:20]!r} (m:ss, h:mm:ss or seconds)")
    return seconds


def _times(events: Sequence[Mapping[str, Any]], start: float) -> list[float]:
    """The time by which each event is released: the latest ``ts`` up to it (an end event
    :func:`timeline` moved after its cell's last line keeps that line's time, as :meth:`Replay.due`
    releases it, which stops at the first event still ahead), so non-decreasing."""
    out, previous = [], start
    for event in events:
        ts = event.get("ts")
        previous = max(previous, float(ts)) if isinstance(ts, (int, float)) else previous
        out.append(previous)
    return out


def parse_speed(text: str) -> float:
    """``--speed``: campaign seconds per second, a finite number in [0.1, 1000] (0, a
    negative or NaN speed ran the clock backwards or froze it).

    Raises:
        argparse.ArgumentTypeError: naming the value and the range.
    """
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and SPEEDS[0] <= value <= SPEEDS[-1]):
        raise argparse.ArgumentTypeError(
            f"replay speed must be a number from {SPEEDS[0]:g} to {SPEEDS[-1]:g} (campaign "
            f"seconds per second), got {text!r}")
    return value


def load_events(path: str | Path) -> tuple[list[Event], Path | None]:
    """The events of a run folder's latest session (and the folder), or of an events file
    (and None).

    Raises:
        FugueError: nothing there to replay (one line naming the path).
    """
    from engine.events import read_events
    from engine.observe.follow import CampaignFollower, last_session_offset

    path = Path(path)
    if path.is_dir():
        if not RunFolder(path).runner_log.is_file():
            raise FugueError(f"{path}: not a campaign run folder (no runner.jsonl)")
        events = CampaignFollower(path, last_session_offset(path)).poll()
        run_dir: Path | None = path
    elif path.is_file():
        events, run_dir = read_events(path), None
    else:
        raise FugueError(f"{path}: no such run folder or events file")
    events = [e for e in events if isinstance(e, dict) and e.get("type")]
    if not events:
        raise FugueError(f"{path}: no events to replay")
    return events, run_dir


def write_stream(run_dir: str | Path, out: str | Path) -> int:
    """Write a run folder's latest session as one events file (what :func:`load_events`
    replays); returns the number of events."""
    events, _ = load_events(run_dir)
    with open(out, "w", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event, separators=(",", ":")) + "\n")
    return len(events)


def timeline(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``events`` in the order they happened, the order a replay releases them.

    A follower that reads a finished folder in one go yields each attempt's events in one
    block between the runner's ``cell_started`` and its end event, so the runner's events in
    between (``suspect``, ``hung``, ``control``) came after the cell's last lines: a replay
    released them only at the cell's end, together with the kill, and the watchdog states
    were never on screen. Sorted by ``ts`` (stable), with the follower's guarantees kept: an
    attempt's own events never before its ``cell_started``, its end event never before its
    last line. An event without a ``ts`` keeps the time of the one before it."""
    from engine.events import is_runner_event
    from engine.observe.follow import END_EVENTS

    started: dict[tuple[Any, Any], float] = {}
    last: dict[tuple[Any, Any], float] = {}
    when: list[float] = []
    previous = float("-inf")
    for event in events:
        ts = event.get("ts")
        t = float(ts) if isinstance(ts, (int, float)) else previous
        ident = (event.get("cell"), event.get("attempt"))
        if is_runner_event(event):
            if event.get("type") == "cell_started":
                started[ident] = t
            elif event.get("type") in END_EVENTS:
                t = max(t, last.get(ident, t))
        elif ident[0] is not None:
            t = max(t, started.get(ident, t))
            last[ident] = max(t, last.get(ident, t))
        when.append(t)
        previous = t
    order = sorted(range(len(events)), key=lambda i: when[i])
    return [events[i] for i in order]


class Replay:
    """Events released by a campaign-time clock (see the module doc). Thread-safe: keys
    change it on the UI thread, the run screen's worker calls :meth:`due`."""

    def __init__(self, events: Sequence[Mapping[str, Any]], source: str = "", speed: float = 1.0,
                 paused: bool = False, wall: Callable[[], float] = time.monotonic) -> None:
        # typed once here (a loaded file's already are): what due() releases is what a
        # live follower yields, engine.event_types' events
        self.events: list[Event] = [parse_event(e) for e in timeline(events)]
        self.source = source
        self.speed = float(speed)
        self.paused = paused
        self.pos = 0
        self._wall = wall
        self._lock = threading.RLock()  # due_tagged holds it around due
        stamps = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
        self.start_ts = float(stamps[0]) if stamps else 0.0
        self.end_ts = float(max(stamps)) if stamps else 0.0
        #: Each event's campaign time (one without a ``ts``: the one before it's), sorted as
        #: the events are: a seek finds its position by bisection.
        self._times = _times(self.events, self.start_ts)
        #: Bumped by each seek: news posted before it (an older position) is dropped.
        self.generation = 0
        self._now = self.start_ts
        self._last_wall = wall()
        self._steps = 0
        self._to_end = False
        #: "fastest" / "slowest" after a key asked past the end of the ladder (shown once).
        self._limit = ""

    @classmethod
    def open(cls, path: str | Path, **kwargs: Any) -> tuple[Replay, Path | None]:
        events, run_dir = load_events(path)
        return cls(events, source=str(path), **kwargs), run_dir

    # -- the clock --------------------------------------------------------------------------
    def clock(self) -> float:
        """Campaign time now (the ``ts`` the replay has reached)."""
        with self._lock:
            return self._now

    def _advance(self) -> None:
        wall = self._wall()
        if not self.paused and self.pos < len(self.events):
            self._now = min(self.end_ts, self._now + (wall - self._last_wall) * self.speed)
        self._last_wall = wall

    # -- controls (UI thread) ---------------------------------------------------------------
    def toggle_pause(self) -> None:
        with self._lock:
            self._advance()
            self.paused = not self.paused

    def step(self, n: int = 1) -> None:
        """Release the next ``n`` events (pauses)."""
        with self._lock:
            self._advance()
            self.paused = True
            self._steps += n

    def set_speed(self, faster: bool) -> float:
        with self._lock:
            self._advance()
            bigger = [s for s in SPEEDS if s > self.speed]
            smaller = [s for s in SPEEDS if s < self.speed]
            if faster and bigger:
                self.speed = bigger[0]
            elif not faster and smaller:
                self.speed = smaller[-1]
            self._limit = "" if (bigger if faster else smaller) else (
                "fastest" if faster else "slowest")
            return self.speed

    def to_end(self) -> None:
        with self._lock:
            self._to_end = True

    def seek(self, target: float) -> tuple[int, list[Event]]:
        """Move to campaign time ``target`` (Unix s, clamped to the campaign), backwards or
        forwards; keeps pause and speed. Returns the new generation and every event up to
        there (those with ``ts <= target``, in stream order): the caller folds them into
        fresh state, so the screen reads exactly as if played to ``target``."""
        import bisect

        with self._lock:
            self._advance()
            self._now = min(self.end_ts, max(self.start_ts, float(target)))
            self.pos = bisect.bisect_right(self._times, self._now)
            self._steps, self._to_end = 0, False
            self.generation += 1
            return self.generation, self.events[:self.pos]

    def seek_step(self) -> float:
        """What ``[`` and ``]`` move: a 20th of the campaign, at least 10 s (campaign s)."""
        return max(SEEK_MIN_S, (self.end_ts - self.start_ts) / SEEK_STEPS)

    def due_tagged(self) -> tuple[int, list[Event]]:
        """:meth:`due` with the generation it belongs to (read under the same lock)."""
        with self._lock:
            return self.generation, self.due()

    @property
    def done(self) -> bool:
        return self.pos >= len(self.events)

    # -- the worker ---------------------------------------------------------------------------
    def due(self) -> list[Event]:
        """The events whose time has come (in stream order), advancing the clock."""
        with self._lock:
            self._advance()
            out: list[Event] = []
            while self.pos < len(self.events):
                event = self.events[self.pos]
                ts = event.get("ts")
                ts = float(ts) if isinstance(ts, (int, float)) else self._now
                if self._to_end or ts <= self._now:
                    pass
                elif self._steps > 0:
                    self._steps -= 1
                    self._now = ts
                else:
                    break
                out.append(event)
                self.pos += 1
            if self._to_end or self.pos >= len(self.events):
                self._now = max(self._now, self.end_ts)  # the end is where it ended
            return out

    def status(self) -> str:
        """``replay · 12/340 events · 0:31 of 1:05 · 10× · paused``."""
        from fugue_tui.format import fmt_duration

        with self._lock:
            state = "finished" if self.pos >= len(self.events) else (
                "paused" if self.paused else "playing")
            speed = f"{self.speed:g}×" + (f" ({self._limit})" if self._limit else "")
            return (f"replay · {self.pos}/{len(self.events)} events · "
                    f"{fmt_duration(max(0.0, self._now - self.start_ts))} of "
                    f"{fmt_duration(self.end_ts - self.start_ts)} · {speed} · {state}")
