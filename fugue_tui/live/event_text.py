"""What the front ends write for an event: the one event → text function (:func:`event_text`).

Every text a front end writes for an event is here, once, in the form each place shows it:

- :attr:`Form.PLAIN`: ``fugue-tui --batch`` off a terminal (``fugue_tui.console.plain``),
  one line per lifecycle event and epoch end, indented under its cell's start line;
- :attr:`Form.RECENT`: the recent lines of the live views, the terminal's
  (``fugue_tui.console.live``) and the dashboard's run screen (both through
  :class:`fugue_tui.live.view.LiveView`), unstamped: the view adds the time;
- :attr:`Form.LIFECYCLE`: the run screen's further recent lines, the starts and ends the
  terminal view shows elsewhere (its cell line and header);
- :attr:`Form.WARNING`: the stderr line of a ``warning`` event, also the run screen's
  notification.

What a front end knows of the event's cell (its label, index, current attempt) comes in as
a :class:`KnownCell`: an :class:`engine.observe.state.CellState` for the views, the names
the plain writer collected from the runner's events. The texts are the ones the three
writers printed before they became this module (tests/unit/fugue_tui/live/test_event_text.py pins them
byte for byte); a field a text needs and the event lacks raises :class:`KeyError`, which
each front end turns into a :func:`not_shown` line instead of stopping a campaign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from engine.event_base import Event, RunnerEvent
from engine.event_types import (
    CellJobProgress,
    CellPhase,
    CellSummary,
    CellWarning,
    RunnerCampaignAborted,
    RunnerCampaignDone,
    RunnerCampaignInterrupted,
    RunnerCampaignStarted,
    RunnerCellStarted,
    RunnerControl,
    RunnerDone,
    RunnerFailed,
    RunnerHung,
    RunnerKilled,
    RunnerLeftoversKilled,
    RunnerResumed,
    RunnerRetried,
    RunnerSkipped,
    RunnerSuspect,
    RunnerWarning,
)
from engine.events import parse_event

#: The prefix of every warning line on stderr (the run screen's notification drops it).
WARNING_PREFIX = "fugue-tui: warning: "
#: The plain lines about the running cell are indented under its ``[i/N] label`` line.
INDENT = "    "


class Form(Enum):
    """Where a text is shown (see the module)."""

    PLAIN = "plain"
    RECENT = "recent"
    LIFECYCLE = "lifecycle"
    WARNING = "warning"


class KnownCell(Protocol):
    """What a front end knows of a cell: :class:`engine.observe.state.CellState` is one."""

    @property
    def label(self) -> str: ...  # "" when not known

    @property
    def index(self) -> int | None: ...  # its 1-based place in the campaign

    @property
    def attempt(self) -> int | None: ...  # the attempt the front end follows


def event_text(event: Mapping[str, Any], form: Form, cell: KnownCell | None = None,
               total: int = 0) -> list[str]:
    """The lines ``form`` shows for ``event`` (none: it says nothing there).

    ``event``: a typed :class:`engine.event_base.Event` (a JSON document is read as one).
    ``cell``: what the caller knows of the cell the event names (None: nothing, or the
    event names none). ``total``: the campaign's cell count (the plain ``[i/N]``).
    Raises :class:`KeyError`, :class:`TypeError` or :class:`ValueError` for an event that
    lacks, or mistypes, a field its text needs."""
    typed = parse_event(event)
    if form is Form.PLAIN:
        return _plain(typed, cell, total)
    if form is Form.RECENT:
        return _recent(typed, cell)
    if form is Form.LIFECYCLE:
        return _lifecycle(typed, cell)
    return _warning(typed, cell)


def warning_line(event: Mapping[str, Any], label: str = "") -> str | None:
    """The stderr line of a ``warning`` event (the cell's or the runner's), or None for any
    other event: ``fugue-tui: warning: <cell label>: <message>`` (no label: none known)."""
    lines = _warning(parse_event(event), NamedCell(label))
    return lines[0] if lines else None


def not_shown(event: Mapping[str, Any], exc: Exception) -> str:
    """The line that stands for an event a front end failed to show (a display bug must
    not stop a campaign): ``(event 'killed' not shown: KeyError: 'reason')``."""
    return f"(event {event.get('type')!r} not shown: {type(exc).__name__}: {exc})"


@dataclass(frozen=True)
class NamedCell:
    """A :class:`KnownCell` from names alone: what a writer without a campaign state (the
    plain lines, :func:`warning_line`'s callers) collected from the runner's events."""

    label: str = ""
    index: int | None = None
    attempt: int | None = None


# -- the forms ------------------------------------------------------------------------------
# The plain lines read most fields by key (a missing one makes the writer's "not shown"
# line), the recent lines with defaults: each as its writer did before they were merged,
# so that a malformed event reads the same as it always did in each place.

def _warning(event: Event, cell: KnownCell | None) -> list[str]:
    if event.type != "warning":
        return []
    where = f"{cell.label}: " if cell is not None and cell.label else ""
    return [f"{WARNING_PREFIX}{where}{event.get('message', '')}"]


def _plain(event: Event, cell: KnownCell | None, total: int) -> list[str]:
    if isinstance(event, RunnerCampaignStarted):
        resume = ", resuming" if event.get("resume") else ""
        return [f"campaign {event['campaign']}: {event['cells']} cells, device "
                f"{event['device']}{resume}, run folder {event['run_dir']}"]
    if isinstance(event, RunnerCellStarted):
        return [f"[{event['index']}/{total}] {event['label']} (attempt {event['attempt']})"]
    if isinstance(event, CellPhase) and event.phase == "data_load":
        return [f"{INDENT}datasets loaded in {event['seconds']:.2f} s"]
    if isinstance(event, CellJobProgress) and event.epoch_end:
        extra = f"  val_acc {event['val_acc']:.3f}" if event.val_acc is not None else ""
        return [f"{INDENT}{event['job_id']}  epoch {event['epoch']}/{event['epochs']}  "
                f"loss {event['loss']:.4f}{extra}  {event.get('train_sps', 0):,.0f} samples/s"]
    if isinstance(event, CellSummary):
        throughput = event.throughput_group
        line = f"{INDENT}T_group {event['T_group']:.2f} s"
        if throughput is not None:
            line += f"  throughput {throughput:,.0f} samples/s"
        return [line + f"  status {event['status']}",
                *(f"{INDENT}warning: {warning}" for warning in event.get("warnings") or [])]
    if isinstance(event, RunnerSkipped):
        return [f"[{event['index']}/{total}] {event['label']}: skipped, {event['reason']}"]
    if isinstance(event, RunnerSuspect | RunnerHung):
        return [f"{INDENT}cell {event.type}: {event['seen']}"]
    if isinstance(event, RunnerRetried):
        if event.get("node_lost"):
            return [f"{INDENT}{_node_lost(event)}"]
        how = _retry(event, event.__getitem__)
        return [f"{INDENT}{how}: attempt {event['attempt']} next"]
    if isinstance(event, RunnerKilled):
        return [f"{INDENT}cell killed: {event['reason']}"]
    if isinstance(event, RunnerFailed):
        return [f"{INDENT}cell failed: {event.get('error', '')}"]
    if isinstance(event, RunnerControl):
        # not indented: it is about the cell it names, not the one running now
        key = event.get("cell")
        named = (f"[{cell.index}/{total}] {cell.label}"
                 if cell is not None and cell.index is not None and cell.label else key)
        return [" ".join(p for p in ("control", str(event["cmd"]), named if key else "") if p)
                + f": {_control_outcome(event)}"]
    return []


def _recent(event: Event, cell: KnownCell | None) -> list[str]:
    lines = []
    if isinstance(event, RunnerCampaignInterrupted | RunnerCampaignAborted):
        lines.append(f"campaign {event.type.split('_')[1]}")
    if isinstance(event, RunnerWarning):  # about a cell or none
        where = f"{cell.label}: " if cell is not None else ""
        return [*lines, f"{where}warning: {event.get('message', '')}"]
    if isinstance(event, RunnerControl):  # abort names no cell; a bad ref no key
        what = cell.label if cell is not None else (event.get("cell") or "")
        parts = ("control", event.get("cmd"), what, _control_outcome(event))
        return [*lines, " ".join(p for p in parts if p)]
    if cell is None:
        if isinstance(event, RunnerKilled) and event.get("predecessor"):
            # a cell of an earlier runner, killed before this runner listed its cells
            lines.append(f"cell {str(event.get('cell'))[:8]} (earlier runner): killed, "
                         f"{event.get('reason', '')}")
        return lines
    if isinstance(event, RunnerEvent):
        return [*lines, *_runner_recent(event, cell.label)]
    if event.get("attempt") != cell.attempt:
        return lines  # a stale attempt's late lines are left out
    if isinstance(event, CellWarning):
        lines.append(f"{cell.label}: warning: {event.get('message', '')}")
    elif isinstance(event, CellSummary):
        lines += [f"{cell.label}: warning: {w}" for w in event.get("warnings") or []]
    return lines


def _runner_recent(event: RunnerEvent, label: str) -> list[str]:
    """The recent line of a runner event about a known cell."""
    if isinstance(event, RunnerSkipped):
        return [f"{label}: skipped, {event.get('reason', '')}"]
    if isinstance(event, RunnerSuspect | RunnerHung):
        return [f"{label}: {event.type}, {event.get('seen', '')}"]
    if isinstance(event, RunnerResumed):
        return [f"{label}: progressing again"]
    if isinstance(event, RunnerRetried):
        if event.get("node_lost"):
            return [f"{label}: {_node_lost(event)}"]
        how = _retry(event, event.get)
        return [f"{label}: {how}, attempt {event.get('attempt')} next"]
    if isinstance(event, RunnerKilled):
        return [f"{label}: killed, {event.get('reason', '')}"]
    if isinstance(event, RunnerFailed):
        return [f"{label}: failed, {event.get('error', '')}"]
    if isinstance(event, RunnerLeftoversKilled):
        return [f"{label}: leftover processes killed {event.get('pids')}"]
    return []


def _lifecycle(event: Event, cell: KnownCell | None) -> list[str]:
    if isinstance(event, RunnerCampaignStarted):
        return [f"campaign started: {event.get('cells')} cells"]
    if isinstance(event, RunnerCellStarted | RunnerDone):
        label = cell.label if cell else str(event.get("cell", ""))[:8]
        what = (f"started (attempt {event.get('attempt')})"
                if isinstance(event, RunnerCellStarted) else "done")
        return [f"{label}: {what}"]
    if isinstance(event, RunnerCampaignDone):
        return [f"campaign finished, exit code {event.get('exit_code')}"]
    return []


def _retry(event: RunnerRetried, read: Callable[[str], Any]) -> str:
    """``manual retry`` or ``retry 1/2``, the counts read by ``read`` (``event.get``: a
    missing one reads None; ``event.__getitem__``: it raises KeyError)."""
    if event.get("manual"):
        return "manual retry"
    return f"retry {read('retry')}/{read('retries')}"


def _node_lost(event: RunnerRetried) -> str:
    """``node lost: rerun on another node (attempt 2 of 3)``: the attempt that runs next
    of the last one node losses allow (``retry`` of ``retries`` counts the node losses,
    which use no retry of the campaign's budget). An event without the counts (a runner
    before they were written) reads ``(attempt 2)``."""
    attempt, lost, most = event.get("attempt"), event.get("retry"), event.get("retries")
    if isinstance(attempt, int) and isinstance(lost, int) and isinstance(most, int):
        where = f"attempt {attempt} of {attempt + most - lost}"
    else:
        where = f"attempt {attempt}"
    return f"node lost: rerun on another node ({where})"


def _control_outcome(event: RunnerControl) -> str:
    """``applied`` (``applied, <whom>``: a kill naming a process) or ``ignored (<why>)``."""
    if event.get("applied"):
        return f"applied, {event['reason']}" if event.get("reason") else "applied"
    return f"ignored ({event.get('reason')})"
