"""The Results screen's row pane: for the selected group row, its hpo view — the
best-so-far curve of an hpo row as a step chart, with its time to best (issue 25:
:mod:`fugue_tui.app.models.hpo`), which of its trained models are on disk (issue 50:
:mod:`fugue_tui.app.models.saved_models`) — then its provenance (:func:`fugue_tui.app.models.results.provenance`).

The curve comes first: the pane is cut at its height and the provenance list is long.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import var
from textual.widgets import Static

from fugue_tui.app.models.hpo import best_curve, curve_text
from fugue_tui.app.models.results import provenance
from fugue_tui.app.models.saved_models import models_line

#: What the pane says while no row is selected.
PROMPT = "select a row: its provenance"
#: The fewest columns the best-so-far curve is drawn at (a narrower pane cuts it).
MIN_CURVE_WIDTH = 8


class ProvenancePane(Static):
    """See the module docstring. ``row``: the selected group row (its columns by name, as
    :meth:`pandas.DataFrame.to_dict` ``"records"`` gives it), None: no row selected."""

    #: Redrawn whenever it is set, even to an equal row: the curve is drawn at the pane's
    #: width of that moment, which may have changed since (``always_update``).
    row: var[dict[str, Any] | None] = var(None, init=False, always_update=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(PROMPT, id=kwargs.pop("id", "provenance"), **kwargs)

    def watch_row(self, row: dict[str, Any] | None) -> None:
        if row is None:
            self.update(Text(PROMPT, style="dim"))
            return
        text = Text(style="bold")  # the base style the pane always had
        best = best_curve(row)
        if best is not None:
            ttb = row.get("time_to_best_s")
            text.append_text(curve_text(best, ttb if isinstance(ttb, (int, float)) else None,
                                        max(MIN_CURVE_WIDTH, self.content_size.width - 1)))
            text.append("\n\n")
        saved = models_line(row)  # issue 50: the group's trained models on disk
        if saved is not None:
            text.append(f"{'models':>13} ", style="dim")
            text.append(saved + "\n\n")
        text.append("provenance\n")
        for label, value in provenance(row):
            text.append(f"{label:>13} ", style="dim")
            text.append(value + "\n")
        self.update(text)
