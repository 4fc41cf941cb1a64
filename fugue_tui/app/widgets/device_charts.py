"""The run screen's monitor pane, in three views (``t`` on the run screen:
:data:`MONITOR_VIEWS`), all read from the run model (:class:`fugue_tui.app.models.run.RunModel`):

- ``cell``: live device charts of the selected cell, from its monitor's ``sample`` events:
  GPU utilisation, VRAM and power with a GPU; without one, the CPU and RSS of the cell's
  process tree (labelled so). When no cell runs, host CPU and memory from the dashboard's
  own psutil polling, labelled "idle polling".
- ``timeline``: the campaign's host/device timeline with its cells' boundaries
  (:mod:`fugue_tui.app.models.timeline`), redrawn at most every :data:`TIMELINE_REDRAW_S`.
- ``curves``: the selected cell's per-job loss and validation curves across executors
  (:mod:`fugue_tui.app.models.curves`).

Charts are drawn by :func:`fugue_tui.report.charts.metric_panels` and redrawn only when
their data or the widget's size changed, and new samples of the same series at most every
:data:`MIN_REDRAW_S` (plotext is the costliest thing on screen).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import Static

from engine.observe.state import CellState
from fugue_tui.app.models.curves import curves_text
from fugue_tui.app.models.run import RunModel
from fugue_tui.app.models.series import HOST_PANELS, Series, panels
from fugue_tui.report.charts import metric_panels

#: Seconds between two redraws for new samples of the same series.
MIN_REDRAW_S = 2.0
#: Seconds between two redraws of the timeline while the campaign runs: it spans the whole
#: campaign (minutes), and one draw costs 20-90 ms (plotext, binning every cell's samples).
TIMELINE_REDRAW_S = 5.0
#: What the monitor pane shows, in turn (``t``).
MONITOR_VIEWS = ("cell", "timeline", "curves")
#: Each view as the notice after ``t`` names it.
VIEW_NAMES = {"cell": "the selected cell's monitor", "timeline": "the campaign timeline",
              "curves": "loss and validation across executors"}


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
        #: The view shown (:data:`MONITOR_VIEWS`).
        self.monitor_view = MONITOR_VIEWS[0]

    def on_resize(self) -> None:
        """The pane changed size (the run header grew or lost a line, the terminal was
        resized): the screen's next refresh draws it again at the new size. Without this a
        finished campaign's pane, which no other tick redraws, kept the height it was drawn
        at, its last lines cut off."""
        if self._drawn is not None and hasattr(self.screen, "dirty"):
            self.screen.dirty = True

    def next_view(self) -> str:
        """Switch to the next of :data:`MONITOR_VIEWS` (after the last: the first); returns
        it. The next :meth:`show_monitor` draws it."""
        views = MONITOR_VIEWS
        self.monitor_view = views[(views.index(self.monitor_view) + 1) % len(views)]
        return self.monitor_view

    def show_monitor(self, model: RunModel, cell: CellState | None,
                     running: CellState | None, now: float) -> None:
        """Draw the current view for the selected ``cell`` (None: no row selected) while
        ``running`` (None: no cell) runs, at the screen's clock ``now`` (Unix seconds)."""
        if self.monitor_view == "timeline":
            self._show_timeline(model, now)
        elif self.monitor_view == "curves":
            self.set_title("loss and validation across executors (t: cell monitor)")
            state = model.view.state
            self.show_text(("curves", cell.key if cell else None),
                           (model.curves.version, model.spans_signature()),
                           lambda w, h: curves_text(model.curves, state, cell, w, h))
        else:
            self._show_cell(model, cell, running)

    def _show_cell(self, model: RunModel, cell: CellState | None,
                   running: CellState | None) -> None:
        series = model.samples.get(cell.key, cell.attempt) if cell is not None else None
        if cell is not None and series is not None and len(series.t):
            self.set_title(f"monitor: {cell.label} attempt {cell.attempt}")
            self.show(series, live=cell.active)  # an ended cell's value is its last
        elif running is None and len(model.host.t):
            self.set_title("host (idle polling: no cell runs)")
            self.show(model.host, HOST_PANELS)
        else:
            self.set_title("monitor")
            self.show(None, empty="no monitor samples for this cell (yet)")

    def _show_timeline(self, model: RunModel, now: float) -> None:
        from fugue_tui.app.models.timeline import render

        state = model.view.state
        self.set_title("campaign timeline: cells' CPU, RSS, GPU (t: loss curves)")
        # the axis grows with the clock while the campaign runs: a second is enough
        tick = int(now) if state.state == "running" else None
        color = "NO_COLOR" not in os.environ
        self.show_text(("timeline", color),
                       (model.timeline.version, tick, model.spans_signature()),
                       lambda w, h: Text.from_ansi(render(
                           model.timeline, state, model.view.clock(), w, h, color=color)),
                       every=TIMELINE_REDRAW_S)

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
