"""The run screen's cell filter (``F``): a picker of the statuses, executors and experiments
present, each with its count (:func:`fugue_tui.app.models.cell_filter.choices`); the value
picked is set (picked again: dropped), "clear" shows every cell. The table then shows only
the matching cells (and the running one), its title says how many of how many
(:meth:`CellFilter.title`). Also the small list picker the bulk commands use to choose an
experiment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from fugue_tui.app.models.cell_filter import choices, parse_choice

if TYPE_CHECKING:
    from fugue_tui.app.screens.run import RunScreen


class ChoicePicker(ModalScreen[str | None]):
    """A question and a list: Enter (or a click) answers with the option's id, Escape
    with None. ``options``: ``(id, label)``; ``highlight``: the id highlighted first."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="pick.cancel")]

    def __init__(self, question: str, options: list[tuple[str, str]],
                 highlight: str | None = None) -> None:
        super().__init__()
        self.question, self.options, self.highlight = question, options, highlight

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            yield OptionList(*(Option(label, id=oid) for oid, label in self.options),
                             id="choices")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        ids = [oid for oid, _ in self.options]
        options.highlighted = ids.index(self.highlight) if self.highlight in ids else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


def pick_filter(screen: RunScreen) -> None:
    """``F``: ask which value to filter the cells by, then apply it (redrawn at once)."""
    current = screen.cell_filter
    options = [(oid, label) for oid, label, _ in choices(screen.view.state.cells.values(),
                                                         current)]

    def picked(option: str | None) -> None:
        if option is None:
            return
        choice = parse_choice(option)
        screen.cell_filter = (type(current)() if choice is None
                              else screen.cell_filter.toggled(*choice))
        screen._redraw_now()  # noqa: SLF001 (the screen's own redraw, at once)
    screen.app.push_screen(ChoicePicker(
        "Show the cells with (Enter; a value marked ✓ again drops it; esc leaves the filter "
        "as it is):", options), picked)
