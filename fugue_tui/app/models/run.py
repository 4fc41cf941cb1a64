"""The run screen's model, Textual-free: the one consumer of a campaign's event stream for
every pane of the run screen (issue 41).

A :class:`RunModel` takes what a follow or replay worker read (the campaign's events, a
host sample, whether the runner is alive: one :class:`fugue_tui.app.messages.Followed`
message) and updates, once per event, everything the panes draw from:

- :attr:`RunModel.view`: the shared :class:`fugue_tui.live.view.LiveView` over
  :class:`engine.observe.state.CampaignState` (the cell table, the job pane, the header, the
  recent lines), plus the lifecycle lines the batch view leaves out;
- :attr:`RunModel.samples`: each cell attempt's monitor samples (the cell monitor charts);
- :attr:`RunModel.timeline`: every cell's samples on the campaign's time axis;
- :attr:`RunModel.curves`: every cell's loss and validation points;
- :attr:`RunModel.host`: the host's own samples while no cell runs ("idle polling").

A cell's monitor ``sample`` feeds the two sample stores, anything else the curves: the type
guard is :func:`fugue_tui.app.models.series.cell_sample`, asked once per event here. The
screen reads the model and redraws; the model never touches a widget.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.event_base import Event
from engine.events import parse_event
from engine.observe.state import CellState
from fugue_tui.app.models.curves import CurveStore
from fugue_tui.app.models.run_text import note_lifecycle
from fugue_tui.app.models.series import SampleStore, Series, cell_sample
from fugue_tui.app.models.timeline import CampaignTimeline
from fugue_tui.live.event_text import warning_line
from fugue_tui.live.view import LiveView

#: What :func:`freeze_heap` froze, by name (once each per process).
_FROZEN: set[str] = set()
_FREEZE_LOCK = threading.Lock()


def freeze_heap(what: str) -> bool:
    """Move every object alive now out of the garbage collector's sight, once per ``what``
    and process (:func:`gc.freeze`); True when it did. For what lives as long as the
    dashboard — its imports (Textual, rich; pandas, numpy, pyarrow once the strip loaded
    them), the app and its widgets: a full collection traversed all of it again and again,
    a few a minute, 100-400 ms each on a loaded host, more as the campaign went on (issue
    47, item 2). What was garbage at that moment is never collected: call it where little
    is (after start-up, after an import)."""
    with _FREEZE_LOCK:
        if what in _FROZEN:
            return False
        _FROZEN.add(what)
    gc.freeze()
    return True


#: Lifecycle lines kept for the events pane (it shows the newest that fit its height).
RECENT_KEPT = 50
#: The host sample's fields the idle-polling charts draw.
HOST_FIELDS = ("cpu_pct", "rss_mib")


class RunModel:
    """Everything the run screen's panes show of one campaign (see the module).

    ``clock``: the screen's clock (Unix seconds; a replay's campaign time in replay).
    ``runner_alive``: None until known, then whether the runner process lives (False for a
    replay or a campaign with no runner).
    """

    def __init__(self, clock: Callable[[], float] = time.time,
                 runner_alive: bool | None = None) -> None:
        self.view = LiveView(0, clock=clock, recent=RECENT_KEPT)
        self.samples = SampleStore()
        self.timeline = CampaignTimeline()
        self.curves = CurveStore()
        self.host = Series()
        #: The latest host sample (:meth:`HostPoller.sample`; empty before the first).
        self.host_now: dict[str, Any] = {}
        self.runner_alive = runner_alive

    # -- intake ---------------------------------------------------------------------------
    def apply(self, events: Iterable[Event]) -> list[str]:
        """Fold ``events`` (in stream order) into every store (a JSON document is read as
        its typed event: :func:`engine.events.parse_event`); returns the warnings among them as lines for the user, in order (the cell's
        label first, no "fugue-tui: warning: " prefix). An event the live view cannot show
        leaves a line in the recent lines instead of stopping the others."""
        notices: list[str] = []
        for event in map(parse_event, events):
            self._apply(event)
            line = warning_line(event, self.label_of(event))
            if line is not None:
                notices.append(line.removeprefix("fugue-tui: warning: "))
        return notices

    def _apply(self, event: Event) -> None:
        view = self.view
        try:
            view.apply(event)
        except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop us
            view.recent.append(f"(event {event.get('type')!r} not shown: {exc})")
        note_lifecycle(view, event)
        sample = cell_sample(event)
        if sample is not None:
            self.samples.take(sample)
            self.timeline.take(sample)
        else:
            self.curves.add(event)

    def observe(self, host_sample: Mapping[str, Any] | None = None,
                runner_alive: bool | None = None) -> None:
        """The other facts of a worker's message: a host sample (``t`` monotonic seconds,
        ``cpu_pct``, ``rss_mib``) and the runner's liveness (None: not read this time)."""
        if host_sample:
            self.host.add(dict(host_sample), HOST_FIELDS)
            self.host_now = dict(host_sample)  # the host bar's latest, devices included
        if runner_alive is not None:
            self.runner_alive = runner_alive

    # -- reading --------------------------------------------------------------------------
    def cell(self, key: str | None) -> CellState | None:
        """The cell of ``key`` (None for no key or an unknown one)."""
        return self.view.state.cells.get(key) if key else None

    def label_of(self, event: Event) -> str:
        """The label of the cell ``event`` names ("" when it names none known)."""
        cell = self.view.state.cells.get(event.get("cell") or "")
        return cell.label if cell is not None else ""

    def running_cells(self) -> list[CellState]:
        """Every cell running now, in campaign order (several in a multi-device campaign)."""
        return [cell for cell in self.view.state.cells.values() if cell.active]

    def finished_count(self) -> int:
        return sum(1 for cell in self.view.state.cells.values() if cell.finished)

    def active_pids(self) -> set[int]:
        return {c.pid for c in self.view.state.cells.values() if c.active and c.pid}

    def spans_signature(self) -> tuple[tuple[str, int], ...]:
        """Each cell's state and attempt: the timeline's and the curves' cell boundaries
        change when it does."""
        return tuple((c.state, c.attempt) for c in self.view.state.cells.values())


def command_applies(command: str, cell: CellState, runner_alive: bool | None,
                    stopping: bool) -> bool:
    """Whether the runner can take ``command`` (retry, skip, kill) for ``cell`` now: never
    without a live runner or while it stops; kill a running cell, skip a running or queued
    one, retry a running one or one that failed or was killed."""
    if not runner_alive or stopping:
        return False
    if command == "kill":
        return cell.active
    if command == "skip":
        return cell.active or cell.state == "queued"
    return cell.active or cell.state in ("failed", "killed")


def followed_cell(running: list[CellState], chosen: str | None) -> CellState | None:
    """The running cell the run screen follows: with several at once (one per device),
    the one ``chosen`` (``f`` pressed on its row) while it runs, else the first of
    ``running`` (campaign order); None when none runs."""
    return next((c for c in running if c.key == chosen), running[0] if running else None)


def stacks_available(cell: CellState) -> bool:
    """Whether ``cell`` has live processes to ask for their stacks: it runs, with a known
    pid and an attempt folder (its log's)."""
    return cell.active and bool(cell.pid) and bool(cell.log_path)


def why_no_stacks(cell: CellState | None, replay: bool) -> str:
    """Why ``d`` (dump stacks) has nothing to ask now, in one line for a notification
    ("" when it has: :func:`stacks_available`). A key that does nothing silently left
    the user guessing whether it was pressed at all (issue 47)."""
    if replay:
        return "no stacks to dump: a replay has no processes to ask"
    if cell is None:
        return "no stacks to dump: no cell selected (f selects the running one)"
    if not cell.active:
        state = cell.state.replace("_", " ")
        return (f"no stacks to dump: {cell.label} is {state}, not running; d asks a "
                "running cell's processes (f selects the running one)")
    if not stacks_available(cell):
        return (f"no stacks to dump yet: {cell.label} has started but its process is not "
                "known yet (no pid); try again in a moment")
    return ""


def devices_line(running: list[CellState]) -> str:
    """Each device's running cell and what its monitor last read, one line per device, when
    cells run on several devices at once ("" otherwise)::

        running on 2 devices:
          device 1/2 cuda:0 GPU-…: XA seq pass 1 · GPU 87 % · VRAM 5,120 MiB · CPU 98 %

    A figure the monitor has not measured (no GPU, no sample yet) is left out, never 0."""
    placed = [c for c in running if c.device]
    if len(placed) < 2:
        return ""
    return "\n".join([f"running on {len(placed)} devices:"] + [
        "  " + " · ".join([f"{c.device}: {c.label}", *_device_figures(c.sample or {})])
        for c in placed])


def _device_figures(sample: Mapping[str, Any]) -> list[str]:
    """The device pane's figures from a cell's latest monitor sample (measured ones only)."""
    out = []
    for name, text in (("gpu_util_pct", "GPU {:.0f} %"), ("mem_used_mib", "VRAM {:,.0f} MiB"),
                       ("cpu_pct", "CPU {:.0f} %")):
        value = sample.get(name)
        if isinstance(value, (int, float)):
            out.append(text.format(value))
    return out
