"""What the run screen writes, as functions of the shared model
(:class:`fugue_tui.live.view.LiveView` over :class:`engine.observe.state.CampaignState`) and
of the runner: the campaign header line, the lifecycle lines the batch view leaves out (their
text is :func:`fugue_tui.live.event_text.event_text`'s), and the questions asked before a
cell command is sent. No widgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from engine.event_base import Event
from engine.event_types import RunnerCampaignStarted
from engine.events import parse_event
from engine.observe.state import CellState
from fugue_tui.app.models.cells import NOT_RUN, STOPPED
from fugue_tui.format import PENDING, fmt_duration
from fugue_tui.live.event_text import Form, event_text
from fugue_tui.live.view import LiveView

_CONFIRM = {
    "retry": "Kill '{label}' (attempt {attempt}) and run it again now?",
    "skip": "Kill '{label}' (attempt {attempt}) and skip it? The queue goes on.",
    "skip-queued": "Skip the queued cell '{label}'? It will not run in this campaign.",
    "kill": "Kill '{label}' (attempt {attempt})? It is recorded as killed and not retried.",
}


#: How many shortenings of the campaign line :func:`campaign_header` has (its ``level``).
HEADER_LEVELS = 6


def campaign_header(view: LiveView, run_dir: Path, now: float, *, replay: Any,
                    runner_alive: bool | None, attached: bool, handle: Any,
                    stopping: bool, level: int = 0) -> Text:
    """The campaign line: name, device, the campaign's ``elapsed 1:23`` (ticking with
    ``now`` while it runs), counts, runner and outcome.

    ``level`` (0 to :data:`HEADER_LEVELS` - 1) shortens the line, one part more per level,
    the least needed first: the header takes the first that fits its width (a wrapped
    header hid cell rows at 80x24, issue 47 item 5). 1: the bare ``1:23``; 2: the runner as
    ``pid 123``; 3: a live runner not named (the footer's keys say one runs); 4: the
    ``done`` count (the ``6/20`` says it); 5: the word ``campaign``."""
    state = view.state
    head = Text("" if level >= 5 else "campaign ", style="bold")
    head.append(state.campaign or run_dir.name, style="bold")
    if state.device:
        head.append(f" · {state.device}")
    end = state.ended_ts if state.ended_ts is not None else now
    # labelled: the campaign's clock, the cell line's is "cell 0:15" (issue 47, item 8)
    elapsed = fmt_duration(end - state.started_ts) if state.started_ts else PENDING
    head.append(f" · elapsed {elapsed}" if level < 1 else f" · {elapsed}")
    counts = state.counts()
    if state.state in STOPPED and counts.get("queued"):
        # nothing will run them any more: the table's "not run" (issue 30, item 14)
        counts[NOT_RUN] = counts.pop("queued")
    done = sum(1 for cell in state.cells.values() if cell.finished)
    head.append(f" · cells {done}/{view.total or len(state.cells)}: ")
    if level >= 4 and len(counts) > 1:
        counts.pop("done", None)
    head.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none yet")
    if replay is not None and state.state not in ("done", "interrupted", "aborted"):
        pass  # the replay line below says where it is
    elif runner_alive:
        how = "attached to" if attached else "started"
        pid = handle.pid if handle else "?"
        if level < 2:
            head.append(f" · runner pid {pid} ({how})", style="dim")
        elif level < 3:
            head.append(f" · pid {pid}", style="dim")
        if stopping:
            head.append(" · stopping…", style="bold yellow")
    elif state.state in ("done", "interrupted", "aborted"):
        outcome = "ok" if state.exit_code == 0 else f"exit code {state.exit_code}"
        head.append(f" · finished ({state.state}, {outcome})",
                    style="bold green" if state.exit_code == 0 else "bold yellow")
    else:
        code = handle.exit_code() if handle is not None else None
        why = handle.output_tail(2) if handle is not None else ""
        head.append(" · runner not running" + (f" (exit code {code})" if code is not None
                                                else ""), style="bold red")
        if why:
            head.append(f"\n{why}", style="red")
    if replay is not None:
        head.append(f"\n{replay.status()}", style="bold magenta")
    return head


def note_lifecycle(view: LiveView, event: Event) -> None:
    """Add to ``view`` the lifecycle lines the batch view leaves out (it shows them
    elsewhere): :attr:`~fugue_tui.live.event_text.Form.LIFECYCLE`. A campaign's start also
    sets the view's cell count (the run screen opens before it is known)."""
    event = parse_event(event)  # a JSON document (a test's) is read as its event
    if isinstance(event, RunnerCampaignStarted):
        view.total = int(event.get("cells") or 0)
    for line in event_text(event, Form.LIFECYCLE, view.cell_of(event)):
        view.note(event.get("ts"), line)


def confirm_question(command: str, cell: CellState) -> str:
    """The question asked before ``command`` (retry, skip, kill) is sent for ``cell``."""
    template = "skip-queued" if command == "skip" and cell.state == "queued" else command
    if command == "retry" and not cell.active:
        question = f"Run '{cell.label}' again now (it ended {cell.state})?"
    else:
        question = _CONFIRM[template].format(label=cell.label, attempt=cell.attempt)
    return question
