"""The catalogue as a tree: family → workload type → experiment, with multi-selection.

Each experiment shows its model, dataset, K and size, and whether it can run on this
machine (an unavailable one says why, in short on its line and in full in the details).
Space toggles the experiment under the cursor (or every experiment of a group). Every
selection change made here is kept, so that :meth:`CatalogueTree.undo` takes it back.

| key | binding id | action |
|---|---|---|
| space | plan.toggle | select / deselect |
| j, k, g, G | nav.* | vim-style moves |
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from fugue_tui.app.actions import PLAN, Action, bindings
from fugue_tui.app.models.catalogue import ExperimentInfo

_NAV = (
    Action("nav.down", "j", "cursor_down", "down", "move down", show=False),
    Action("nav.up", "k", "cursor_up", "up", "move up", show=False),
    Action("nav.top", "g", "scroll_home", "top", "first line", show=False),
    Action("nav.bottom", "G", "scroll_end", "bottom", "last line", show=False),
)


#: How many selection changes :meth:`CatalogueTree.undo` can take back.
_UNDO_DEPTH = 50


class CatalogueTree(Tree[str]):
    """Experiments grouped by family and workload type; ``selected`` holds experiment ids."""

    BINDINGS = bindings(tuple(a for a in PLAN if a.id == "plan.toggle") + _NAV)

    class SelectionChanged(Message):
        """The selection changed; ``selected`` in catalogue order."""

        def __init__(self, selected: list[str]) -> None:
            super().__init__()
            self.selected = selected

    def __init__(self, **kwargs) -> None:
        super().__init__("catalogue", **kwargs)
        self.show_root = False
        self.guide_depth = 3
        self.experiments: dict[str, ExperimentInfo] = {}
        self.selected: set[str] = set()
        #: A stream campaign's templates (``arrivals``: its mix or trace) and what each is of
        #: the stream (``"20 %"`` of a Poisson mix, ``"3 jobs"`` of a trace); empty for a
        #: batch campaign (:meth:`set_stream`).
        self.stream: dict[str, str] = {}
        self._leaves: dict[str, TreeNode[str]] = {}
        #: The selections before each change made here, latest last (:meth:`undo`).
        self.history: list[set[str]] = []

    def load(self, experiments: list[ExperimentInfo], selected: list[str]) -> None:
        """Rebuild the tree for a catalogue (keeps ids of ``selected`` that exist)."""
        self.clear()
        self.experiments = {e.id: e for e in experiments}
        self.selected = {e for e in selected if e in self.experiments}
        self._leaves = {}
        self.history.clear()  # another catalogue: the earlier selections may not exist
        families: dict[str, dict[str, list[ExperimentInfo]]] = {}
        for exp in experiments:
            families.setdefault(exp.family or "other", {}).setdefault(exp.type, []).append(exp)
        # Families with something that runs here first: what a user can launch now.
        order = sorted(families, key=lambda f: not any(
            e.available for exps in families[f].values() for e in exps))
        for family in order:
            types = families[family]
            fam_node = self.root.add(family, data=f"group:{family}", expand=True)
            for wtype, exps in types.items():
                type_node = fam_node.add(wtype, data=f"group:{family}/{wtype}", expand=True)
                for exp in exps:
                    self._leaves[exp.id] = type_node.add_leaf(self._label(exp), data=exp.id)
        self._relabel_groups()
        # The cursor on the first line from the start: Textual's tree has none (line -1)
        # until the first key, so the pane showed no cursor line and its details no hint.
        self.cursor_line = 0 if experiments else -1

    def _label(self, exp: ExperimentInfo) -> Text:
        streamed = self.stream.get(exp.id)
        # a stream's template is marked [s]: a stream campaign selects no experiments (its
        # mix or trace names them), and "0 selected" read as an empty campaign
        mark = "[x] " if exp.id in self.selected else ("[s] " if streamed else "[ ] ")
        text = Text(mark, style="bold" if exp.id in self.selected or streamed else "")
        text.append(f"{exp.id:<6} ", style="bold" if exp.available else "dim")
        text.append(exp.summary, style="" if exp.available else "dim")
        if exp.available:
            text.append("  here", style="green")
        else:
            short = exp.reason if len(exp.reason) <= 48 else exp.reason[:47] + "…"
            text.append(f"  unavailable: {short}", style="yellow")
        if streamed:
            text.append(f"  in the stream: {streamed}", style="cyan")
        return text

    def _group_ids(self, node: TreeNode[str]) -> list[str]:
        out: list[str] = []
        for child in node.children:
            if child.data and not child.data.startswith("group:"):
                out.append(child.data)
            else:
                out.extend(self._group_ids(child))
        return out

    def _relabel_groups(self) -> None:
        def walk(node: TreeNode[str]) -> None:
            for child in node.children:
                if child.data and child.data.startswith("group:"):
                    ids = self._group_ids(child)
                    chosen = sum(1 for i in ids if i in self.selected)
                    here = sum(1 for i in ids if self.experiments[i].available)
                    name = child.data.split(":", 1)[1].split("/")[-1]
                    streamed = sum(1 for i in ids if i in self.stream)
                    counts = (f"{streamed}/{len(ids)} in the stream" if self.stream and
                              not chosen else f"{chosen}/{len(ids)} selected")
                    child.set_label(Text(f"{name}  ({counts}, {here} here)"))
                    walk(child)
        walk(self.root)

    def set_selected(self, ids: list[str] | set[str], notify: bool = True,
                     undoable: bool = True) -> None:
        """Replace the selection (unknown ids are ignored). ``notify``: a change made here,
        posted as :class:`SelectionChanged` and, when ``undoable`` and it changed anything,
        kept for :meth:`undo`; without it (a campaign file loaded) the history restarts."""
        chosen = {i for i in ids if i in self.experiments}
        if not notify:
            self.history.clear()
        elif undoable and chosen != self.selected:
            self.history.append(set(self.selected))
            del self.history[:-_UNDO_DEPTH]
        self.selected = chosen
        for exp_id, node in self._leaves.items():
            node.set_label(self._label(self.experiments[exp_id]))
        self._relabel_groups()
        if notify:
            self.post_message(self.SelectionChanged(self.ordered()))

    def set_stream(self, templates: dict[str, str]) -> None:
        """Mark a stream campaign's templates (``{id: "20 %"}``, :attr:`stream`; ``{}``: a
        batch campaign); the selection is left as it is."""
        templates = {i: w for i, w in templates.items() if i in self.experiments}
        if templates == self.stream:
            return
        self.stream = templates
        for exp_id, node in self._leaves.items():
            node.set_label(self._label(self.experiments[exp_id]))
        self._relabel_groups()

    def undo(self) -> bool:
        """Restore the selection before the last change made here; False: none to undo."""
        if not self.history:
            return False
        self.set_selected(self.history.pop(), undoable=False)
        return True

    def ordered(self) -> list[str]:
        """The selection in catalogue order."""
        return [e for e in self.experiments if e in self.selected]

    def action_toggle_selection(self) -> None:
        node = self.cursor_node
        if node is None or node.data is None:
            return
        if node.data.startswith("group:"):
            ids = self._group_ids(node)
            if all(i in self.selected for i in ids):
                self.set_selected(self.selected - set(ids))
            else:
                self.set_selected(self.selected | set(ids))
        else:
            self.set_selected(self.selected ^ {node.data})

    def render_label(self, node: TreeNode[str], base_style: Style, style: Style) -> Text:
        """The cursor's line starts with ``> `` while the tree has the focus: a capture
        without colours (tmux capture-pane -p, NO_COLOR) shows the cursor by its
        highlight alone otherwise, that is not at all."""
        label = super().render_label(node, base_style, style)
        if self.has_focus and node is self.cursor_node:
            label = Text.assemble(("> ", "bold"), label)
        return label

    def highlighted_experiment(self) -> ExperimentInfo | None:
        node = self.cursor_node
        if node is None or not node.data or node.data.startswith("group:"):
            return None
        return self.experiments.get(node.data)
