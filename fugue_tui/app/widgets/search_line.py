"""The run screen's search line: one row above the footer, ``/`` then the query, what is
searched (``log`` or ``events``) and the count (``3/17``). It only shows and takes text;
:mod:`fugue_tui.app.screens.run_search` decides what matches and moves the panes."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static

#: The query box's id: the run screen's handlers select its messages by it.
INPUT_ID = "search-input"


class SearchLine(Horizontal):
    """``/ [query……] in log 3/17``: docked at the bottom, one row high, above the footer
    (docked widgets overlap in Textual: the margin keeps the footer's row free).
    :meth:`show_count` writes the right-hand part."""

    DEFAULT_CSS = """
    SearchLine { dock: bottom; height: 1; margin-bottom: 1; background: $panel; }
    SearchLine > .slash { width: 3; padding: 0 0 0 1; }
    SearchLine > Input { border: none; height: 1; padding: 0; width: 1fr;
                         background: $panel; }
    SearchLine > Input:focus { border: none; background: $boost; }
    SearchLine > .count { width: auto; padding: 0 1; }
    """

    @dataclass
    class Typed(Message):
        """The query changed (each key typed)."""

        query: str

    @dataclass
    class Kept(Message):
        """Enter: the query is kept, the keys go back to the pane searched."""

        query: str

    def __init__(self, target: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target = target

    def compose(self) -> ComposeResult:
        yield Static("/", classes="slash")
        yield Input(placeholder=f"search the {self.target}", id=INPUT_ID,
                    select_on_focus=False)
        yield Static(f"in {self.target}", classes="count")

    @property
    def query_box(self) -> Input:
        return self.query_one(Input)

    def show_count(self, label: str) -> None:
        """``label`` (``3/17``, ``0/0``) after what is searched."""
        self.query_one(".count", Static).update(f"in {self.target} {label}")

    # The box's own messages become the line's: the screen's handlers are then named
    # after the search (on_search_line_typed), not after any Input it may hold.
    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Typed(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Kept(event.value))
