"""The Results screen's figures pane: the figures of the rows shown as terminal charts
(speedup over the baseline executor, wall-clock, throughput, energy per model, peak memory,
accuracy parity, the ablation ladder: :func:`fugue_tui.report.figures.build`), and under
them the K sweeps with their knees and the advice (:class:`SweepPanel`).

The figures are built in the screen's loading worker; this pane only draws them, on the UI
thread (plotext is not thread-safe), and only when the figures or its width changed: a
redraw costs tens of milliseconds per chart.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.widgets import Static

from fugue_tui.app.widgets.sweep_panel import SweepPanel

if TYPE_CHECKING:
    from fugue_tui.report.figures import Results
    from fugue_tui.report.sweeps import SweepView

#: The narrowest the charts are drawn (a narrower pane scrolls them sideways).
MIN_WIDTH = 40


class FigureCharts(VerticalScroll):
    """See the module docstring. Its charts are ``#figures``, the sweeps ``SweepPanel``."""

    #: The figures to draw; set with :meth:`show` (the sweeps first). Drawn when set.
    results: var[Results | None] = var(None, init=False, always_update=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(id=kwargs.pop("id", "figures-pane"), **kwargs)
        self._drawn: tuple[int, int] | None = None
        #: Chart redraws (tests read them).
        self.draws = 0

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="figures")
        yield SweepPanel()  # K sweeps and advice (issue 23), under the figures

    def show(self, results: Results, sweep: SweepView | None) -> None:
        """Draw ``results`` and the K sweeps ``sweep`` (None: none) at the pane's width."""
        self.query_one(SweepPanel).set_view(sweep)
        self.results = results

    def show_nothing(self) -> None:
        """Say that there is nothing to draw (the figures last drawn are cleared)."""
        self.query_one("#figures", Static).update(Text("no results to draw yet", style="dim"))

    def watch_results(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw the charts if the figures or the width changed since they were drawn."""
        from fugue_tui.report.charts import figure_chart

        width = max(MIN_WIDTH, self.size.width - 2)
        key = (id(self.results), width)
        if self.results is None or key == self._drawn:
            return
        self._drawn = key
        color = "NO_COLOR" not in os.environ
        self.query_one(SweepPanel).draw(width, color)
        parts = [figure_chart(f, width=width, color=color) for f in shown_figures(self.results)]
        text = "\n\n".join(parts)
        self.query_one("#figures", Static).update(Text.from_ansi(text) if color else Text(text))
        self.draws += 1


def shown_figures(results) -> list:
    """The figures in the screen's order: a stream campaign's ``completion`` first (what
    its strategies are compared on), and not at all without stream rows (a batch user has
    no use for an empty stream chart; the exports say it was skipped)."""
    first = [f for f in results.figures if f.key == "completion" and f.bars]
    # stream rows only: no speedup bar is left (stream cells are compared on completion)
    return first + [f for f in results.figures if f.key != "completion"
                    and not (first and f.key == "speedup" and not f.bars)]
