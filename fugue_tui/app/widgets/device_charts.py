"""Live device charts of the selected cell, from its monitor's ``sample`` events: GPU
utilisation, VRAM and power with a GPU; without one, the CPU and RSS of the cell's process
tree (labelled so). When no cell runs, host CPU and memory from the dashboard's own psutil
polling, labelled "idle polling". Charts are drawn by :func:`fugue_tui.report.charts.metric_panels`
and redrawn only when their data or the widget's size changed, and new samples of the same
series at most every :data:`MIN_REDRAW_S` (plotext is the costliest thing on screen).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import Static

from fugue_tui.app.models.series import Series, panels
from fugue_tui.report.charts import metric_panels

#: Seconds between two redraws for new samples of the same series.
MIN_REDRAW_S = 2.0


class DeviceCharts(Static):
    """Stacked line charts of one series."""

    def __init__(self, **kwargs) -> None:
        super().__init__("no monitor samples yet", **kwargs)
        self._drawn: Any = None
        #: How many times the charts were drawn (tests and the CPU benchmark read it).
        self.draws = 0
        self._last_draw = float("-inf")
        self._title: str | None = None
        #: True while :meth:`show_text` holds a change back for its rate limit.
        self.deferred = False

    def set_title(self, title: str) -> None:
        """Set the border title; a no-op when unchanged (Textual repaints the whole widget on
        every assignment, and the run screen sets it on each redraw)."""
        if title != self._title:
            self._title = title
            self.border_title = title

    def show_text(self, what: Any, version: Any, build: Callable[[int, int], Text],
                  every: float = MIN_REDRAW_S) -> bool:
        """Draw ``build(width, height)`` (the campaign timeline, the loss curves) unless
        ``what`` at this ``version`` and size is what is shown; a newer version of the same
        ``what`` at most every ``every`` seconds. True when it redrew."""
        width, height = self.size.width, self.size.height
        key = ("text", what, version, width, height)
        self.deferred = False
        if key == self._drawn:
            return False
        now = time.monotonic()
        if (self._drawn is not None and self._drawn[:2] == key[:2]
                and self._drawn[3:] == key[3:] and now - self._last_draw < every):
            self.deferred = True  # the caller asks again later (the last change must show)
            return False
        self._last_draw = now
        self._drawn = key
        self.update(build(width, height), layout=False)  # a fixed-size pane
        self.draws += 1
        return True

    def show(self, series: Series | None, which: tuple[tuple[str, str], ...] | None = None,
             empty: str = "no monitor samples for this cell (yet)", live: bool = True) -> bool:
        """Draw ``series`` (panels chosen by :func:`fugue_tui.app.models.series.panels` unless
        ``which``); True when it redrew. ``live``: the series is still growing (its latest
        value reads "now"; a cell that ended reads "last")."""
        self.deferred = False  # only show_text defers (the cell charts catch up on samples)
        width, height = self.size.width, self.size.height
        chosen = which if which is not None else (panels(series) if series else ())
        key = (id(series), series.version if series else None, chosen, width, height, empty,
               live)
        if key == self._drawn:
            return False
        now = time.monotonic()
        if (self._drawn is not None and key[0] == self._drawn[0] and key[2:] == self._drawn[2:]
                and now - self._last_draw < MIN_REDRAW_S):
            return False  # only newer samples of what is shown: wait for the next slot
        self._last_draw = now
        self._drawn = key
        if series is None or not len(series.t) or width < 20 or height < 5:
            self.update(Text(empty, style="dim"), layout=False)  # a fixed-size pane
            return True
        text = metric_panels(list(series.t), [(title, list(series.values.get(name, ())))
                                              for name, title in chosen],
                             width=width, height=height, latest="now" if live else "last")
        self.update(Text.from_ansi(text), layout=False)  # a fixed-size pane: no layout pass
        self.draws += 1
        return True
