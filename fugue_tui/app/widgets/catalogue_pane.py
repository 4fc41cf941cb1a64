"""The plan screen's catalogue pane: the catalogue tree (:class:`CatalogueTree`) over the
details of the experiment under the cursor (what it is, whether it can run here and if not
why).

:meth:`CataloguePane.load` reads the catalogue in a thread worker (it loads the plugins and
probes the machine: :func:`fugue_tui.app.models.catalogue.experiment_infos`) and posts a
:class:`~fugue_tui.app.messages.CatalogueLoaded`, which bubbles to the screen: the screen
decides what the selection becomes (it belongs to the plan) and calls :meth:`show`.

The selection keys (``a`` all that run here, ``c`` clear, ``u`` undo) are this pane's
bindings: they act only while the focus is in the pane, never on a settings field.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static, Tree

from engine.errors import FugueError
from fugue_tui.app.actions import PLAN, bindings
from fugue_tui.app.messages import CatalogueLoaded
from fugue_tui.app.models.catalogue import ExperimentInfo, experiment_infos
from fugue_tui.app.repaint import repaint_now
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree

#: What the details say while the cursor is on a group.
HINT = "space selects · a: all that run here · c: clear · u: undo"

#: The binding ids of the selection keys this pane owns.
CATALOGUE_KEYS = ("plan.select-available", "plan.clear", "plan.undo")


class CataloguePane(Vertical):
    """See the module docstring. The tree is ``#catalogue``, the details ``#exp-details``."""

    BINDINGS = bindings(tuple(a for a in PLAN if a.id in CATALOGUE_KEYS))

    #: What the details show (:meth:`show_details`).
    _details_shown: Text | None = None

    def compose(self) -> ComposeResult:
        yield CatalogueTree(id="catalogue")
        yield Static("", id="exp-details")

    def on_mount(self) -> None:
        # The details follow the cursor as it moves (a reactive's watcher runs at once),
        # drawn in the frame that shows the cursor; the tree's NodeHighlighted message, a
        # task hop later, reached them a frame (25-40 ms) after it.
        self.watch(self.catalogue, "cursor_line", self.show_details, init=False)

    @property
    def catalogue(self) -> CatalogueTree:
        return self.query_one(CatalogueTree)

    @work(thread=True, exclusive=True, group="catalogue")
    def load(self, experiments_file: str | None) -> None:
        """Read the catalogue merged with ``experiments_file`` (None: the built-in one)."""
        try:
            infos = experiment_infos(experiments_file)
        except FugueError as exc:
            self.post_message(CatalogueLoaded([], str(exc), experiments_file or ""))
            return
        self.post_message(CatalogueLoaded(infos, "", experiments_file or ""))

    def show(self, experiments: list[ExperimentInfo], selected: list[str]) -> None:
        """Show a catalogue with the experiments of ``selected`` that it has selected."""
        self.catalogue.load(experiments, selected)
        self.show_details()

    def on_tree_node_highlighted(self) -> None:
        self.show_details()

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        if event.node.data and not str(event.node.data).startswith("group:"):
            self.catalogue.action_toggle_selection()  # Enter on an experiment selects it too

    def show_details(self) -> None:
        """The details of the experiment under the cursor (on a group: how to select); drawn
        with the cursor's move, nothing when they show already."""
        exp = self.catalogue.highlighted_experiment()
        details = self.query_one("#exp-details", Static)
        if exp is None:
            text = Text(HINT, style="dim")
        else:
            text = Text(f"{exp.id}: {exp.description or exp.summary}\n")
            if exp.available:
                text.append("can run here", style="green")
            else:
                text.append(f"unavailable: {exp.reason}", style="yellow")
        if text == self._details_shown:
            return
        self._details_shown = text
        # No layout: the details' box is fixed (3 lines, 2 when compact: app.tcss).
        details.update(text, layout=False)
        repaint_now(details)

    def action_select_available(self) -> None:
        """Add every experiment that can run here to the selection."""
        tree = self.catalogue
        tree.set_selected(tree.selected | {e.id for e in tree.experiments.values() if e.available})

    def action_clear_selection(self) -> None:
        """Deselect everything, saying so (and how to take it back) when it dropped any."""
        dropped = len(self.catalogue.selected)
        self.catalogue.set_selected(set())
        if dropped:
            self.notify(f"cleared the selection ({dropped} experiment"
                        f"{'s' if dropped > 1 else ''}): u undoes", markup=False)

    def action_undo_selection(self) -> None:
        if not self.catalogue.undo():
            self.notify("nothing to undo in the selection", severity="warning", markup=False)
