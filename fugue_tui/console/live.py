"""The live view of a campaign: the terminal view of ``fugue-tui --batch`` (stdout a
terminal, ``FUGUE_PLAIN`` unset).

One event stream, two renderers: :class:`LiveProgress` takes the same events as
:class:`fugue_tui.console.plain.PlainProgress` (from
:class:`engine.observe.follow.CampaignFollower`) and draws them with the shared
:class:`fugue_tui.live.view.LiveView` (the dashboard's run screen draws the same view).
Warnings also go to stderr, one line each as they come
(:func:`fugue_tui.live.event_text.warning_line`): above the live view, and kept in the
terminal after it.

Rendering is single-threaded (no Rich refresh thread): the follow loop calls
:meth:`LiveProgress.tick` between polls and the display is redrawn at most every
:data:`REFRESH_S` seconds, so the state is never read while an event is being applied.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from engine.event_base import Event
from fugue_tui.live.event_text import not_shown, warning_line
from fugue_tui.live.view import LiveView

#: Minimum seconds between two redraws (at most 4 per second).
REFRESH_S = 0.25


class LiveProgress:
    """Event consumer with the interface of :class:`fugue_tui.console.plain.PlainProgress`
    (``progress(event)``), plus ``tick()`` (redraw when due) and a context manager that
    starts and stops the Rich live display on ``console``."""

    def __init__(self, total: int, console: Console, clock: Callable[[], float] = time.time,
                 refresh_s: float = REFRESH_S, monotonic: Callable[[], float] = time.monotonic):
        self.view = LiveView(total, clock=clock)
        self.console = console
        self.refresh_s = refresh_s
        self._monotonic = monotonic
        self._last = float("-inf")
        self._dirty = True
        self.live = Live(console=console, auto_refresh=False, transient=False,
                         redirect_stdout=True, redirect_stderr=True,
                         vertical_overflow="ellipsis")

    def __call__(self, event: Event) -> None:
        try:
            self.view.apply(event)
            cell = self.view.cell_of(event)
            line = warning_line(event, cell.label if cell is not None else "")
            if line is not None:  # above the view (Rich redirects stderr there), and kept
                print(line, file=sys.stderr, flush=True)
        except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop a campaign
            self.view.recent.append(not_shown(event, exc))
        self._dirty = True

    def tick(self, force: bool = False) -> None:
        """Redraw if :data:`REFRESH_S` has passed since the last redraw (or ``force``)."""
        now = self._monotonic()
        if not force and now - self._last < self.refresh_s:
            return
        self._last = now
        self._dirty = False
        self.live.update(self._renderable(), refresh=True)

    def _renderable(self) -> RenderableType:
        try:
            return self.view.render()
        except Exception as exc:  # a display bug must not stop a campaign
            return Text(f"(live view failed: {type(exc).__name__}: {exc})")

    def __enter__(self) -> LiveProgress:
        self.live.start()
        self.tick(force=True)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self.live.update(self._renderable(), refresh=False)
        finally:
            self.live.stop()  # draws the final view once and leaves it on the screen
