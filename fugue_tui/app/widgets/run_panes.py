"""The run screen's panes, drawn together from its run model: the screen says what to show
(the selected cell, the running one, the clock), each pane how (and whether anything it
shows changed). The cell table is not drawn here: its sync moves the cursor, which the
screen's following decides about."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.dom import DOMNode

from engine.observe.state import CellState
from fugue_tui.app.models.run import RunModel
from fugue_tui.app.widgets.device_charts import DeviceCharts
from fugue_tui.app.widgets.host_bar import HostBar
from fugue_tui.app.widgets.job_progress import JobProgress
from fugue_tui.app.widgets.log_pane import Feed, LogPane
from fugue_tui.app.widgets.recent_lines import RecentLines
from fugue_tui.app.widgets.run_header import RunHeader

#: The log pane's title while the selected cell has no attempt (so no log) yet.
NO_LOG = "log: no attempt yet"


@dataclass
class RunPanes:
    """The mounted panes of one run screen (found once, after its compose)."""

    header: RunHeader
    jobs: JobProgress
    charts: DeviceCharts
    log: LogPane
    recent: RecentLines
    host: HostBar

    @classmethod
    def of(cls, screen: DOMNode) -> RunPanes:
        """The panes ``screen`` composed (raises ``NoMatches`` before its compose)."""
        return cls(screen.query_one(RunHeader), screen.query_one(JobProgress),
                   screen.query_one(DeviceCharts), screen.query_one(LogPane),
                   screen.query_one(RecentLines), screen.query_one(HostBar))

    def draw(self, model: RunModel, cell: CellState | None, running: CellState | None,
             now: float, run_dir: Path, **header: Any) -> bool:
        """Redraw from ``model`` what changed, for the selected ``cell`` while ``running``
        runs (either None), at the screen's clock ``now`` (Unix seconds); ``header`` is the
        rest of :meth:`RunHeader.show`'s keywords. True when a pane held a change back
        (its rate limit): the screen should draw again at a later tick."""
        self.jobs.show(model.view, cell, now)
        self.charts.show_monitor(model, cell, running, now)
        deferred = self.jobs.deferred or self.charts.deferred
        self.header.show(model, now, run_dir, **header)
        # the host now, while the campaign's runner lives (ended, replayed: no bar)
        self.host.show(model.host_now if model.runner_alive else {})
        # the newest lines that fit, laid out by the pane at its size when it paints
        self.recent.lines = tuple(model.view.recent)
        return deferred

    def feed_held(self, held: list[Feed]) -> None:
        """Feed the log pane what was held for it while the screen was covered; empties
        ``held``."""
        for feed in held:
            self.log.feed(*feed)
        held.clear()
