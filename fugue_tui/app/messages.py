"""Messages from workers to screens: the only way results of blocking work reach widgets.

Each is a dataclass of what one worker produced, typed with the classes the worker really
builds. Those classes are imported for the type checker only: at run time a dataclass keeps
its annotations as text, and importing them here would load the plan's model, the runner's
process handle, the engine's results and the report's figures (pandas) into every screen
that imports a message, the run screen included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from textual.message import Message  # its __post_init__ lets dataclasses initialise it

if TYPE_CHECKING:
    from engine.event_base import Event
    from engine.results.load import Runs
    from fugue_tui.app.models.catalogue import ExperimentInfo
    from fugue_tui.app.models.plan import PlanDoc, Preview
    from fugue_tui.app.process import RunnerHandle
    from fugue_tui.report.figures import Results
    from fugue_tui.report.sweeps import SweepView

#: How loud a :class:`Notice` is (Textual's notification severities).
Severity = Literal["information", "warning", "error"]


@dataclass(eq=False)
class CatalogueLoaded(Message):
    """The catalogue and what can run here (one :class:`ExperimentInfo` per experiment, in
    catalogue order), or ``error``; ``source``: the experiments file merged in (``""``:
    none)."""

    experiments: list[ExperimentInfo]
    error: str = ""
    source: str = ""


@dataclass(eq=False)
class PreviewReady(Message):
    """The runner's dry run of the plan as it was at edit number ``revision``."""

    preview: Preview
    revision: int


@dataclass(eq=False)
class PreviewShown(Message):
    """The preview pane shows ``preview`` now (the latest edit's: stale ones never are)."""

    preview: Preview


@dataclass(eq=False)
class PlanLoaded(Message):
    """A campaign file at ``path`` read into a plan (``doc``), or (``doc`` None) the
    ``error`` naming file and key."""

    path: str
    doc: PlanDoc | None
    error: str = ""


@dataclass(eq=False)
class Launched(Message):
    """The runner of the campaign in ``run_dir`` was started (``handle``; its session starts
    at byte ``offset`` of ``runner.jsonl``), or (``handle`` None) the ``error``; ``attach``
    when a runner of the campaign was already running and the dashboard attaches to it
    instead."""

    run_dir: str
    handle: RunnerHandle | None = None
    offset: int = 0
    error: str = ""
    attach: bool = False


@dataclass(eq=False)
class Followed(Message):
    """New events from the campaign's files (typed: :mod:`engine.event_types`), new log
    lines of the followed cell log (``log_reset``: the file was replaced, start over;
    ``log_path``: the log they come from), whether the runner is alive (None: not known),
    and a host sample when idle polling is on (``t`` monotonic s, ``cpu_pct`` % of one
    core, ``rss_mib`` memory in use, MiB: :meth:`fugue_tui.app.models.series.HostPoller.sample`).
    """

    events: list[Event] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    log_reset: bool = False
    log_path: str | None = None
    runner_alive: bool | None = None
    host_sample: dict[str, float] | None = None
    #: A replay's position generation it was read at (a seek drops older news).
    generation: int = 0


@dataclass(eq=False)
class ResultsLoaded(Message):
    """One load of the Results screen: every row of the source (``runs``), those the
    filter keeps (``shown``), their table and figures (``results``), their K sweeps and
    advice (``sweep``) and the time-to-best speedup of each hpo row (``ttb``: row key →
    speedup); or the ``error`` that left nothing to show (no results yet, a file that is
    not ours). ``filter_error``: why the filter was not understood (the rows are then
    unfiltered); ``version`` counts the loads of the screen's worker."""

    runs: Runs | None = None
    shown: Runs | None = None
    results: Results | None = None
    error: str = ""
    filter_error: str = ""
    version: int = 0
    sweep: SweepView | None = None
    ttb: dict[str, float] = field(default_factory=dict)
    #: Row key → its cell's T_group speedup over seq (issue 47; the analysis' ``speedup``).
    speedup: dict[str, float] = field(default_factory=dict)


@dataclass(eq=False)
class Notice(Message):
    """A line for the user, at ``severity``."""

    text: str
    severity: Severity = "information"
