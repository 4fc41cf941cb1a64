"""The plan screen: pick experiments and executors, set the campaign, preview its cells,
save or load it as a campaign TOML file, and launch it.

The plan is a campaign document (:mod:`fugue_tui.app.models.plan`), edited in the settings
form (:class:`fugue_tui.app.widgets.campaign_form.CampaignForm`) and the catalogue pane
(:class:`fugue_tui.app.widgets.catalogue_pane.CataloguePane`); every edit re-runs the
runner's dry run in the preview pane (:class:`fugue_tui.app.widgets.plan_preview.PlanPreview`:
a thread worker, debounced, stale results dropped by revision), so the preview shows exactly
the cells, keys and skips the runner would. A launch is :func:`fugue_tui.app.models.launch.launch_plan`
in a thread worker.

| key | binding id | action |
|---|---|---|
| space | plan.toggle | select the experiment (or group) under the cursor |
| a | plan.select-available | select every experiment that can run here |
| c | plan.clear | clear the selection |
| u | plan.undo | undo the last selection change |
| ctrl+r | plan.launch | launch the campaign |
| ctrl+s | plan.save | save as campaign TOML |
| ctrl+o | plan.load | load a campaign TOML |
| ctrl+t | plan.attach | attach to a running campaign |
| f6 | plan.selfcheck | run ``fugue-tui selfcheck`` (the title line shows this machine's last verdict) |
| alt+c, alt+w, alt+u, alt+e | plan.section-* | jump to a section of the settings form (campaign, watchdog, budget, executors) |
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import events, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Select, Static

from fugue_tui.app.actions import LEAVE, PLAN, PLAN_SECTIONS, bindings
from fugue_tui.app.messages import CatalogueLoaded, Launched, PlanLoaded, PreviewShown
from fugue_tui.app.models.catalogue import experiment_infos
from fugue_tui.app.models.launch import LaunchFailed, launch_plan
from fugue_tui.app.models.plan import (
    PlanDoc,
    Preview,
    default_doc,
    default_save_path,
)
from fugue_tui.app.repaint import repaint_now
from fugue_tui.app.screens.modals import PathScreen
from fugue_tui.app.screens.plan_files import PlanFiles
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK, CampaignForm
from fugue_tui.app.widgets.catalogue_pane import CATALOGUE_KEYS, CataloguePane
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from fugue_tui.app.widgets.footer import KeyFooter
from fugue_tui.app.widgets.plan_preview import PREVIEW_DEBOUNCE_S, PlanPreview
from fugue_tui.app.widgets.selfcheck_line import SelfcheckLine

if TYPE_CHECKING:  # the app imports this screen
    from textual.css.query import QueryType

    from fugue_tui.app.app import FugueApp

__all__ = ["PREVIEW_DEBOUNCE_S", "PlanScreen", "experiment_infos"]


class PlanScreen(Screen):
    """Plan a campaign; see the module docstring for keys."""

    #: Textual's ``Screen.focused`` without its repaint of the whole screen at each focus
    #: change (a full render of the catalogue, the form and the preview at every Tab): the
    #: widgets losing and gaining the focus repaint themselves (their ``:focus`` styles),
    #: and so do the panes whose focus marks change (:meth:`_mark_pane`).
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    #: The pane whose title shows the focus mark (:meth:`_mark_pane`).
    _marked_pane: Widget | None = None

    #: The selection keys are the catalogue pane's (they act only while it has the focus:
    #: ``c`` on a settings checkbox cleared the whole selection, issue 47).
    BINDINGS = bindings(tuple(a for a in PLAN if a.id != "plan.toggle"
                              and a.id not in CATALOGUE_KEYS) + PLAN_SECTIONS + LEAVE)

    def __init__(self, runs_dir: str = "runs", campaign: str | None = None) -> None:
        super().__init__()
        self.form = CampaignForm(default_doc(runs_dir), id="settings")
        self.preview_pane = PlanPreview(self.form, id="preview-pane")
        self.source_path: Path | None = None
        self.source_doc: PlanDoc | None = None
        self.initial_campaign = campaign
        self.catalogue_file: str | None = None
        self.launching = False
        self._files = PlanFiles(self)

    @property
    def doc(self) -> PlanDoc:
        """The plan: the campaign document the form edits."""
        return self.form.doc

    @doc.setter
    def doc(self, doc: PlanDoc) -> None:
        self.form.doc = doc

    @property
    def result(self) -> Preview | None:
        """The preview shown (None while one is computed, or while a setting is invalid)."""
        return self.preview_pane.result

    @property
    def load_error(self) -> str:
        """Why the last campaign file could not be loaded (``""``: it loaded): shown until
        the next edit or load (a preview already under way when the load failed must not
        overwrite it)."""
        return self.preview_pane.load_error

    @property
    def dashboard(self) -> FugueApp:
        """The app, as the dashboard it is (it opens run screens and attaches)."""
        return cast("FugueApp", self.app)

    @property
    def form_errors(self) -> dict[str, str]:
        """One error per setting that does not parse (and the experiments file's)."""
        return self.form.errors

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="title"):
            yield Static(Text("fugue-tui · plan a campaign", style="bold"), id="title-text")
            yield SelfcheckLine()
        with Horizontal(id="plan-top"):
            yield CataloguePane(id="catalogue-pane")
            yield self.form
        yield self.preview_pane
        yield KeyFooter()

    def on_resize(self, event: events.Resize | None = None) -> None:
        from fugue_tui.app.compact import set_compact

        set_compact(self)
        self.call_after_refresh(self._keep_in_view)

    def _keep_in_view(self) -> None:
        """After a resize, the focused field and the tree's cursor line in view: at 80x24 a
        field focused at 160x48 was off the form's screen, no mark shown, and took the keys
        unseen; the tree's cursor line was off its pane while the details named it."""
        focused = self.focused
        if (focused is not None and self.form in focused.ancestors
                and not self.form.scrollable_content_region.contains_region(focused.region)):
            self.form.scroll_to_center(focused, animate=False, immediate=True)
        tree = self.query_one(CatalogueTree)
        if tree.cursor_line >= 0:
            tree.scroll_to_line(tree.cursor_line, animate=False)

    #: The panes and their border titles; the one holding the focus is marked with
    #: :data:`FOCUS_MARK` (a plain character: a capture without colours shows it too).
    PANES = {"catalogue": "catalogue", "settings": "settings", "preview-pane": "preview"}

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_pane(event.widget)

    def focus_next(self, selector: str | type[QueryType] = "*") -> Widget | None:
        """Tab: inside the form, its next field (from the form's own list: Textual walks
        and sorts the whole screen's widgets at each Tab); elsewhere, and out of the form
        at its ends, Textual's focus chain."""
        return self._step(1, selector) or super().focus_next(selector)

    def focus_previous(self, selector: str | type[QueryType] = "*") -> Widget | None:
        """Shift+Tab: as :meth:`focus_next`, backwards."""
        return self._step(-1, selector) or super().focus_previous(selector)

    def _step(self, direction: int, selector: str | type[QueryType]) -> Widget | None:
        if selector != "*":
            return None
        target = self.form.next_stop(self.focused, direction)
        if target is not None:
            # Scrolled only when not wholly in view, then centred (Textual centres the
            # focused widget at every focus: the form scrolled, and repainted whole, at
            # every Tab of its lower half; centred, the next Tabs need no scroll)
            self.set_focus(target, scroll_visible=False)
            if not self.form.scrollable_content_region.contains_region(target.region):
                self.form.scroll_to_center(target, animate=False, immediate=True)
                self.form.scroll_drawn_now()
        return target

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True,
                  from_app_focus: bool = False) -> None:
        """Textual's, with the focus marks (the field's ``> `` and the pane's title) set
        at once: in the frame that shows the new focus, not one frame later."""
        before = self.focused
        super().set_focus(widget, scroll_visible, from_app_focus)
        if self.focused is before:
            return
        self.form.mark(before, False)
        self.form.mark(self.focused, True)
        if self.focused is not None:
            self._mark_pane(self.focused)

    def _mark_pane(self, focused: Widget) -> None:
        ancestors = focused.ancestors_with_self
        if self._marked_pane is not None and self._marked_pane in ancestors:
            return  # the focus moved inside the marked pane (a Tab in the form)
        self._marked_pane = None
        for pane_id, title in self.PANES.items():
            pane = self.query_one(f"#{pane_id}")
            inside = pane in ancestors
            if inside:
                self._marked_pane = pane
            shown = f"{FOCUS_MARK}{title}" if inside else title
            if pane.border_title != shown:  # setting it repaints the whole pane, even unchanged
                pane.border_title = shown
                repaint_now(pane)  # with the focus, as the field's mark
            # A class, not the :focus-within pseudo-class: with it Textual restyled every
            # widget of the form at each Tab inside it (about 200, most of a Tab's time);
            # the class changes only when the focus enters or leaves the pane.
            pane.set_class(inside, "-focus-within")

    def on_mount(self) -> None:
        self.on_resize()
        self.query_one(CatalogueTree).focus()
        self._load_catalogue(self.doc.get("experiments_file"))
        self.query_one(SelfcheckLine).show(self._runs_dir())
        if self.initial_campaign:
            self._files.load(self.initial_campaign)
        self.schedule_preview()

    # -- catalogue ------------------------------------------------------------------------
    def _load_catalogue(self, experiments_file: str | None) -> None:
        self.query_one(CataloguePane).load(experiments_file)

    def on_catalogue_loaded(self, message: CatalogueLoaded) -> None:
        tree = self.query_one(CatalogueTree)
        if message.error:
            self.form_errors["experiments_file"] = message.error
            self.preview_pane.show_form_error()
            self.notify(message.error, severity="error", timeout=10, markup=False)
            return
        self.form_errors.pop("experiments_file", None)
        self.catalogue_file = message.source or None
        self.query_one(CataloguePane).show(message.experiments,
                                           list(self.doc.get("experiments") or []))
        unknown = [e for e in self.doc.get("experiments") or [] if e not in tree.experiments]
        if unknown:
            self.notify(f"not in the catalogue: {', '.join(unknown)}", severity="warning", markup=False)
        self.schedule_preview()

    def on_preview_shown(self, message: PreviewShown) -> None:
        """A stream campaign's templates marked in the catalogue (its mix or trace names
        them; nothing is selected), from the campaign the preview validated."""
        from fugue_tui.app.models.plan import is_stream, stream_templates

        if message.preview.campaign is None and is_stream(self.doc):
            return  # a setting does not parse yet: the marks stay until it does
        self.query_one(CatalogueTree).set_stream(stream_templates(message.preview.campaign))

    def on_catalogue_tree_selection_changed(self, message: CatalogueTree.SelectionChanged) -> None:
        self.doc["experiments"] = message.selected
        self.schedule_preview()

    # -- form -----------------------------------------------------------------------------
    def action_leave_field(self) -> None:
        """Escape in a settings field: the focus goes to the settings pane (an open
        select's list closes instead; elsewhere Escape does what it did)."""
        focused = self.focused
        if focused is None or focused is self.form or self.form not in focused.ancestors:
            raise SkipAction
        select = next((w for w in focused.ancestors_with_self if isinstance(w, Select)), None)
        if select is not None and select.expanded:
            raise SkipAction
        self.form.park()

    def action_jump(self, section: str) -> None:
        """A section's jump key: the focus on the section's first field, its title at the
        top of the form."""
        self.form.jump(section)

    def on_campaign_form_changed(self) -> None:
        self.schedule_preview()

    def on_campaign_form_experiments_file_changed(
            self, message: CampaignForm.ExperimentsFileChanged) -> None:
        if message.path != self.catalogue_file:
            self._load_catalogue(message.path)

    # -- preview --------------------------------------------------------------------------
    def schedule_preview(self) -> None:
        """Recompute the preview after :data:`PREVIEW_DEBOUNCE_S` of quiet."""
        self.preview_pane.schedule()

    # -- files ----------------------------------------------------------------------------
    def action_save(self) -> None:
        default = str(self.source_path or default_save_path(self.doc))
        self.app.push_screen(PathScreen("Save the plan as a campaign TOML file:", default),
                             self._files.save_to)

    def action_load(self) -> None:
        default = str(self.source_path or "campaigns/")
        self.app.push_screen(PathScreen("Load a campaign TOML file:", default), self._files.load)

    def on_plan_loaded(self, message: PlanLoaded) -> None:
        if message.doc is None:
            self.notify(message.error, title="cannot load the campaign", severity="error",
                        timeout=15, markup=False)
            self.preview_pane.load_error = message.error
            return
        self.doc = message.doc
        self.source_path, self.source_doc = Path(message.path), copy.deepcopy(message.doc)
        self.form.fill()
        tree = self.query_one(CatalogueTree)
        if self.doc.get("experiments_file") != self.catalogue_file:
            self._load_catalogue(self.doc.get("experiments_file"))
        else:
            tree.set_selected(self.doc.get("experiments") or [], notify=False)
        from fugue_tui.app.models.plan import is_stream

        if not is_stream(self.doc):
            tree.set_stream({})  # at once: a stream's marks are its preview's, which follows
        self.notify(f"loaded {message.path}", markup=False)
        self.schedule_preview()

    # -- launch ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launch":
            return None if self.launching else True
        return True

    def action_launch(self) -> None:
        refusal = self.preview_pane.launch_refusal()
        if refusal is not None:
            text, severity = refusal
            self.notify(text, severity=severity, markup=False)
            return
        self.launching = True
        resume = self.form.resume
        self._launch(copy.deepcopy(self.doc), resume)

    def _debounce_pending(self) -> bool:
        """True while the preview shown is older than the plan (an edit is being previewed)."""
        return self.preview_pane.pending

    @work(thread=True, exclusive=True, group="launch")
    def _launch(self, doc: PlanDoc, resume: bool) -> None:
        saved = (self.source_path, self.source_doc) \
            if self.source_path is not None and self.source_doc is not None else None
        try:
            launch = launch_plan(doc, resume, saved)
        except LaunchFailed as exc:
            self.post_message(Launched(exc.run_dir, error=str(exc)))
            return
        self.post_message(Launched(launch.run_dir, launch.handle, launch.offset,
                                   attach=launch.attach))

    def on_launched(self, message: Launched) -> None:
        self.launching = False
        if message.error:
            self.notify(message.error, title="not launched", severity="error", timeout=15, markup=False)
            return
        if message.attach:
            self.notify(f"{message.run_dir} is already running: attached to it",
                        severity="warning", markup=False)
        self.dashboard.open_run(Path(message.run_dir), message.handle, message.offset,
                                attached=message.attach)

    def _runs_dir(self) -> str:
        # The same expansion as a launch (engine.define.paths): "~/runs" is searched where
        # the campaign would write, not in a folder literally named "~".
        return os.path.expanduser(str(self.doc.get("runs_dir") or "runs"))

    def action_attach(self) -> None:
        self._find_running(self._runs_dir())

    def action_selfcheck(self) -> None:
        if not self.query_one(SelfcheckLine).start(self._runs_dir()):
            self.notify("a self-check is running already", severity="warning")

    @work(thread=True, exclusive=True, group="attach")
    def _find_running(self, runs_dir: str) -> None:
        """Offer the recent run folders (running or ended, newest first): the plan's own
        name proposed a folder that often did not exist."""
        from fugue_tui.app.process import attach_offer, recent_runs

        runs = recent_runs(runs_dir)
        default, choices = attach_offer(runs_dir, runs)
        running = sum(r.live for r in runs)
        self.app.call_from_thread(
            self.app.push_screen,
            PathScreen(f"Attach to the run folder of a campaign ({running} running, "
                       f"{len(runs)} recent under {runs_dir}"
                       f"{'; tab: choose one' if runs else ''}):", default, choices=choices),
            lambda path: self.dashboard.attach(path) if path else None)
