"""The cell queue's rows as data, Textual-free: one row per cell (experiment, executor,
configuration, state, attempt, elapsed, T_group, note) and one per earlier attempt of a
retried cell; the run screen's text and the cell table widget both read them."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from engine.observe.state import CellState
from fugue_tui.format import PENDING, fmt_duration, fmt_seconds
from fugue_tui.live.styles import STATE_STYLE

#: The columns of a cell row, in order.
COLUMNS = ("#", "experiment", "executor", "configuration", "state", "attempt", "elapsed",
           "T_group", "note")

def split_label(label: str) -> tuple[str, str, str, str]:
    """``"D_ens seq compile=default pass 2"`` → (experiment, executor, configuration, pass).

    The runner's label is the experiment id, the executor, what else distinguishes the cell
    (compile mode, scheduler, sweep rung) and ``pass N``."""
    tokens = label.split()
    pass_no = ""
    if len(tokens) >= 2 and tokens[-2] == "pass":
        pass_no, tokens = tokens[-1], tokens[:-2]
    exp = tokens[0] if tokens else ""
    executor = tokens[1] if len(tokens) > 1 else ""
    return exp, executor, " ".join(tokens[2:]), pass_no


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


#: The campaign states after which a cell still queued will never run (the runner stopped
#: taking cells): what its row says instead of "queued".
STOPPED = {"aborted": "campaign aborted", "interrupted": "campaign interrupted"}
NOT_RUN = "not run"


def not_run_reason(cell: CellState, campaign_state: str) -> str:
    """Why ``cell`` will not run — "campaign aborted" — when it was still queued as its
    campaign stopped early; "" otherwise."""
    return STOPPED.get(campaign_state, "") if cell.state == "queued" else ""


def cell_row(cell: CellState, now: float, campaign_state: str = "") -> tuple[Any, ...]:
    """The row of a cell's current attempt (see :data:`COLUMNS`); ``campaign_state``: the
    campaign's (a queued cell of an aborted campaign is "not run", not "queued")."""
    exp, executor, config, pass_no = split_label(cell.label)
    if config and pass_no:
        config = f"{config} · pass {pass_no}"
    elif pass_no:
        config = f"pass {pass_no}"
    if cell.started_ts is not None and cell.state not in ("queued", "skipped"):
        end = cell.ended_ts if cell.ended_ts is not None else (now if cell.active else None)
        elapsed = fmt_duration(end - cell.started_ts) if end is not None else PENDING
    else:
        elapsed = PENDING
    note = cell.watchdog if cell.state in ("suspect", "hung") else cell.error
    stopped = not_run_reason(cell, campaign_state)
    state = NOT_RUN if stopped else cell.state
    note = f"{stopped}: not run" if stopped else note
    return (str(cell.index), exp, executor, config or PENDING,
            Text(state, style="yellow" if stopped else STATE_STYLE.get(state, "")),
            str(cell.attempt) if cell.attempt else PENDING, elapsed, fmt_seconds(cell.T_group),
            _short(note or ""))


def history_rows(cell: CellState) -> dict[str, tuple[Any, ...]]:
    """Rows of the cell's earlier attempts, keyed ``<cell key>#<attempt>``."""
    rows = {}
    for h in cell.history:
        elapsed = (fmt_duration(h.ended_ts - h.started_ts)
                   if h.started_ts is not None and h.ended_ts is not None else PENDING)
        rows[f"{cell.key}#{h.attempt}"] = (
            f"{cell.index}·{h.attempt}", "", "", "↳ earlier attempt",
            Text(h.state, style=STATE_STYLE.get(h.state, "")), str(h.attempt), elapsed,
            fmt_seconds(h.T_group), _short(h.error))
    return rows
