"""The Results screen's K-sweep and advice panel (issue 23): for the rows shown, each
workload's throughput-vs-K chart with the knees marked (when the rows form a K sweep) and
the advice per workload and machine and per stream (``fugue-tui report --advise``'s
text).

The analysis (:func:`fugue_tui.report.sweeps.analyse`: bootstrap intervals, knees, advice)
runs in the screen's loading worker, off the UI thread; this widget only draws what it is
given, on the UI thread (plotext is not thread-safe), and only when the analysis or the
width changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:
    from fugue_tui.report.sweeps import SweepView


class SweepPanel(Static):
    """See the module docstring. Hidden while there is nothing to show."""

    DEFAULT_CSS = """
    SweepPanel { height: auto; margin: 0 0 1 0; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", id=kwargs.pop("id", "sweep-panel"), **kwargs)
        self.view: SweepView | None = None
        #: What was drawn last: (the view's id, width, colour), None: nothing yet.
        self._drawn: tuple[int, int, bool] | None = None
        #: Redraws and the plain text last drawn (tests read them).
        self.draws = 0
        self.text = ""
        self.display = False

    def set_view(self, view: SweepView | None) -> None:
        """The :class:`fugue_tui.report.sweeps.SweepView` of the rows shown (None: none)."""
        self.view = view

    def draw(self, width: int, color: bool) -> None:
        """Draw the charts and the advice at ``width`` columns (only when changed)."""
        from fugue_tui.report.sweeps import advice_lines, charts, rule_lines

        key = (id(self.view), width, color)
        if key == self._drawn:
            return
        self._drawn = key
        view = self.view
        if view is None or not (view.curves or view.advice or view.streams):
            self.display = False
            self.text = ""
            return
        parts: list[Text] = []
        if view.curves:
            parts.append(Text("K sweep: training throughput vs K", style="bold"))
            for chart in charts(view, width=width, color=color):
                parts.append(Text.from_ansi(chart) if color else Text(chart))
            parts.extend(Text(line, style="dim") for line in rule_lines(view))
        if view.advice or view.streams:
            parts.append(Text("advice (as fugue-tui report --advise)", style="bold"))
            parts.append(Text("\n".join(advice_lines(view))))
        text = Text("\n").join(parts)
        self.text = text.plain
        self.update(text)
        self.display = True
        self.draws += 1
