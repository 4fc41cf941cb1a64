"""``fugue-tui profile``'s progress (issue 49: it was silent for about 50 s per
configuration): each probe's notes (:func:`engine.profile.collect.run_probe`: the data
loaded, each K started and ended) as a progress line with an ETA for the whole command.

On a terminal one line is redrawn in place (``\\r``, erase to the end of the line) about
twice a second and erased before any other line is printed; piped or with ``FUGUE_PLAIN``,
one plain line per K measured, no escape codes. The ETA assumes a K costs in proportion to
``K + 1`` (the stacked work plus its fixed start), each configuration's imports and data
one unit more, at the rate measured so far: unknown until the first unit ends.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from fugue_tui.format import fmt_duration
from fugue_tui.live.progress_math import eta_seconds

#: ANSI: back to the line's start, erase to its end (only ever written to a terminal).
_ERASE = "\r\x1b[K"


def _weight(k: int) -> int:
    return k + 1


class ProfileProgress:
    """Progress of ``n`` probes over the stack sizes ``ks``: :meth:`__call__` takes each
    probe's notes (``collect(..., progress=this)``), :meth:`say` prints the command's own
    lines (``collect(..., say=this.say)``) without tearing the live line."""

    def __init__(self, ks: Sequence[int], stream: TextIO | None = None,
                 live: bool | None = None, clock: Callable[[], float] = time.monotonic):
        self.ks = tuple(ks)
        self.stream = stream or sys.stdout
        #: Redraw one line in place (a terminal) rather than print a line per K.
        self.live = self._is_terminal(self.stream) if live is None else live
        self.clock = clock
        #: The command's start: the first probe's imports and data count in the ETA's rate.
        self.started: float | None = clock()
        self.done_units = 0
        self.total_units = 0
        self.current: tuple[int, int, str, int | None] | None = None
        self.shown = False

    @staticmethod
    def _is_terminal(stream: TextIO) -> bool:
        from fugue_tui.console.plain import plain_requested

        try:
            return stream.isatty() and not plain_requested()
        except (AttributeError, ValueError):
            return False

    def _per_probe(self) -> int:
        return 1 + sum(_weight(k) for k in self.ks)

    def __call__(self, i: int, n: int, key: str, note: dict[str, Any]) -> None:
        """One note of the ``i``-th of ``n`` probes (profile key ``key``)."""
        now = self.clock()
        if self.started is None:
            self.started = now
        self.total_units = n * self._per_probe()
        phase = note.get("phase")
        k = note.get("k")
        if phase == "loaded":
            self.done_units = (i - 1) * self._per_probe() + 1
        elif phase == "start" and isinstance(k, int):
            self.current = (i, n, key, k)
        elif phase == "end" and isinstance(k, int):
            self.done_units = (i - 1) * self._per_probe() + 1 + sum(
                _weight(x) for x in self.ks[:self.ks.index(k) + 1] if k in self.ks)
            if not self.live:
                state = "measured" if note.get("ok", True) else "failed"
                print(f"  profile {i}/{n} K = {k} {state} ({self._times(now)})",
                      file=self.stream, flush=True)
        elif phase == "done":
            self.done_units = i * self._per_probe()
            self.current = None
            self._erase()
            return
        if self.live:
            self._draw(now)

    def say(self, line: str) -> None:
        """Print ``line`` as the command's own output: the live line is erased first and
        drawn again after it."""
        self._erase()
        print(line, file=self.stream, flush=True)
        if self.live and self.current is not None:
            self._draw(self.clock())

    def close(self) -> None:
        """Erase the live line (the command ends, or stops on an error)."""
        self._erase()

    def _times(self, now: float) -> str:
        elapsed = now - (self.started if self.started is not None else now)
        fraction = self.done_units / self.total_units if self.total_units else None
        eta = eta_seconds(fraction, elapsed, None, now) if self.done_units else None
        return f"elapsed {fmt_duration(elapsed)}, ETA {fmt_duration(eta, missing='unknown')}"

    def _draw(self, now: float) -> None:
        if self.current is None:
            return
        i, n, key, k = self.current
        at = f" K = {k} ({self.ks.index(k) + 1} of {len(self.ks)})" if k in self.ks else ""
        text = f"profile {i}/{n}: {key}{at}: {self._times(now)}"
        width = shutil.get_terminal_size().columns - 1  # a wrapped line would not erase
        if len(text) > width:
            text = "…" + text[len(text) - width + 1:]
        self.stream.write(_ERASE + text)
        self.stream.flush()
        self.shown = True

    def _erase(self) -> None:
        if self.shown:
            self.stream.write(_ERASE)
            self.stream.flush()
            self.shown = False
