"""How the live views name and colour what a cell is doing: shared by the terminal's live
view and the dashboard's tables. Colours vanish under NO_COLOR; the words stay."""

from __future__ import annotations

#: Width of a progress bar (the campaign's, each job's), in characters.
BAR_WIDTH = 20

#: What a cell is doing (its state's ``stage``), in words.
STAGE_WORDS = {"starting": "starting", "setup": "setting up", "training": "training",
               "finishing": "finishing"}
#: How a cell's state is styled.
STATE_STYLE = {"running": "green", "suspect": "bold yellow", "hung": "bold red",
               "done": "green", "failed": "red", "killed": "red", "skipped": "yellow",
               "queued": "dim"}


def shown_state(state: str) -> str:
    """A cell state as the views show it: ``done`` is "ok" (the rows' word)."""
    return "ok" if state == "done" else state
