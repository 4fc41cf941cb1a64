"""The campaign settings form of the plan screen, in sections, each titled with its jump key
(:data:`fugue_tui.app.actions.PLAN_SECTIONS`): the campaign's fields (name, passes, seed,
retries, max_parallel, threads, device, devices, compile, precision, runs folder,
experiments file), its watchdog, its budget, then the executors (with their options) and the
resume box — the order tab walks them in. Checkboxes show their state as ``X`` or blank,
readable without colour; the focused field's label is marked ``> ``. A label stays on its
one line with a gap before its value: a section whose dotted names do not fit with the mark
shows the key within its table (``action`` under the ``watchdog`` title), and what still does
not fit ends in an ellipsis (:func:`fugue_tui.app.models.form_fields.label_names`).

The form edits a campaign document (:mod:`fugue_tui.app.models.plan`) in place, ``doc``, and
keeps one error per field that does not parse, ``errors``. After every edit it posts
:class:`CampaignForm.Changed` (the screen re-previews the plan), and when the experiments file
is set, :class:`CampaignForm.ExperimentsFileChanged` first (the screen reloads the catalogue).
:meth:`CampaignForm.fill` shows a document that was loaded, without posting either.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.message import Message
from textual.validation import ValidationResult
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static
from textual.widgets._select import SelectCurrent

from fugue_tui.app.models.form_fields import (
    DEVICE_PAIR,
    Field,
    campaign_fields,
    field_input_type,
    fit_hint,
    get_path,
    input_type,
    label_names,
    option_hint,
    option_inputs,
    plan_executors,
    set_max_parallel,
    set_option,
    set_path,
    set_setting,
    shown_value,
)
from fugue_tui.app.models.option_text import format_option
from fugue_tui.app.models.plan import PlanDoc
from fugue_tui.app.repaint import repaint_now

#: The name the form's fields had here (tests read them through it).
_fields = campaign_fields

#: Re-exported: the form's fields are read where they are shown (tests, the docs).
__all__ = ["FOCUS_MARK", "CampaignForm", "Field", "FormInput", "FormSelect", "StateCheckbox", "fit_hint", "input_type",
           "option_hint", "option_inputs"]


#: What marks the focused field's label: a plain character, so that a capture without
#: colours (tmux capture-pane -p, NO_COLOR) still shows where the keys go.
FOCUS_MARK = "> "


class _Row:
    """A field's label and the two names it can show (:func:`label_names`): its section
    settles which one as the label's width changes (:meth:`CampaignForm._fit_labels`)."""

    __slots__ = ("full", "indent", "label", "section", "short", "short_shown")

    def __init__(self, label: Label, full: str, short: str, section: str,
                 indent: str = "") -> None:
        self.label, self.full, self.short, self.section = label, full, short, section
        self.indent, self.short_shown = indent, False

    def text(self, focused: bool) -> str:
        return (FOCUS_MARK if focused else self.indent) + (
            self.short if self.short_shown else self.full)


class StateCheckbox(Checkbox):
    """A checkbox whose state reads without colour (``NO_COLOR``, a monochrome terminal):
    ``X`` in the box when ticked, blank when not (Textual draws an ``X`` either way and
    tells them apart by colour alone)."""

    @property
    # A property where Checkbox has a class attribute: the mark depends on the value.
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 (Textual's name)
        return "X" if self.value else " "


class _FocusTint:
    """The focus look of a compact form field (Textual's ``background-tint: $foreground 5%``
    under ``:focus``; a compact field has no border), set in place as the focus comes and
    goes rather than by Textual's restyle.

    On every focus change Textual re-matches the widget's CSS rules (a Select: its children's
    too; an Input: its four component classes) — ``Widget.watch_has_focus`` →
    ``update_node_styles`` — twice per Tab (the field left and the field entered): it made a
    Tab between fields about twice as slow as ``j`` in the tree (issue 47, item 7;
    ``bench.dashboard_tab``). The subclasses neutralise the stylesheet's ``:focus`` tint for
    themselves (their CSS then does not depend on the focus: the restyle would change
    nothing) and set the tint as an inline style of the part that shows it.
    ``tests/unit/fugue_tui/app/test_upstream_focus_style.py`` fails when upstream's focus
    look or its restyle-on-focus changes."""

    #: The tint of a focused field, by theme (``$foreground 5%``).
    _tints: dict[str, Color] = {}

    def focus_tint(self) -> Color:
        """``$foreground 5%`` in the app's theme."""
        app = self.app  # type: ignore[attr-defined]
        tint = self._tints.get(app.theme)
        if tint is None:
            tint = Color.parse(app.get_css_variables()["foreground"]).with_alpha(0.05)
            self._tints[app.theme] = tint
        return tint

    def _tinted(self) -> Widget:
        """The part whose background shows the focus."""
        raise NotImplementedError

    def _tint_shown(self) -> bool:
        return bool(self.has_focus)  # type: ignore[attr-defined]

    def _show_focus(self) -> None:
        """The focus tint inline while it shows; none otherwise (the stylesheet's shows)."""
        try:
            part = self._tinted()
        except NoMatches:  # not composed yet
            return
        part.styles.background_tint = self.focus_tint() if self._tint_shown() else None

    def watch_has_focus(self, has_focus: bool) -> None:  # noqa: FBT001 (Textual's watcher)
        # Not Widget.watch_has_focus (the restyle): nothing in this widget's CSS depends on
        # the focus (the subclasses' DEFAULT_CSS), so the tint changes alone, and repaints.
        self._show_focus()


class FormInput(_FocusTint, Input):
    """The form's text field (see :class:`_FocusTint`). An invalid value keeps Textual's
    error tint, focused or not (``-invalid``: its rule wins over ``:focus`` upstream too)."""

    DEFAULT_CSS = """
    FormInput.-textual-compact:focus { background-tint: 0%; }
    """

    def _tinted(self) -> Widget:
        return self

    def _tint_shown(self) -> bool:
        return self.has_focus and not self.has_class("-invalid")

    def validate(self, value: str) -> ValidationResult | None:
        """Input's validation (it sets ``-invalid``), then the tint that goes with it."""
        result = super().validate(value)
        self._show_focus()
        return result


class FormSelect(_FocusTint, Select[str]):
    """The form's choice field (see :class:`_FocusTint`): the tint on its current value."""

    DEFAULT_CSS = """
    FormSelect.-textual-compact:focus > SelectCurrent { background-tint: 0%; }
    """

    def _tinted(self) -> Widget:
        return self.query_one(SelectCurrent)


class CampaignForm(VerticalScroll):
    """The campaign settings form (see the module docstring)."""

    # The label box's width is the app's (app.tcss: 24 columns, 15 when compact). Its text
    # never wraps: "> watchdog.action" wrapped in 15 columns and showed only ">". The
    # padding keeps a gap before the value ("experiments_fil1/experiments.toml").
    DEFAULT_CSS = """
    CampaignForm .row > .label { text-wrap: nowrap; text-overflow: ellipsis; padding-right: 1; }
    """

    class Changed(Message):
        """A setting, executor or option was edited (``doc`` or ``errors`` changed)."""

    class ExperimentsFileChanged(Message):
        """The experiments file was set to ``path`` (the catalogue to show may change)."""

        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    def __init__(self, doc: PlanDoc, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.doc = doc
        self.fields = campaign_fields()
        self.errors: dict[str, str] = {}
        #: Each input's whole placeholder, before it was cut to the box (:meth:`_fit_hints`).
        self._full_hints: dict[Input, str] = {}
        #: True while :meth:`park` gives the form the focus (:meth:`allow_focus`).
        self._parking = False
        self._tab_stops: list[Widget] | None = None
        self._tab_index: dict[Widget, int] = {}
        #: Each labelled field's label, by the field's id (:meth:`mark`, :meth:`_fit_labels`).
        self._rows: dict[str, _Row] = {}

    def allow_focus(self) -> bool:
        """The form itself is no Tab stop: the first Tab from the catalogue landed on this
        container, with nothing marked, and the next one on the first field. It takes the
        focus only from Escape in one of its fields (:meth:`park`), and stays in the focus
        chain while it has it (Tab then goes on to the first field)."""
        if self._parking:
            return True
        try:
            return self.screen.focused is self
        except NoScreen:  # not mounted (yet)
            return False

    def tab_stops(self) -> list[Widget]:
        """The form's fields in the order Tab walks them (Textual's focus chain, the order
        shown), computed once: the form never recomposes."""
        if self._tab_stops is None:
            self._tab_stops = [w for w in self.screen.focus_chain if self in w.ancestors]
            self._tab_index = {w: i for i, w in enumerate(self._tab_stops)}
        return self._tab_stops

    def next_stop(self, widget: Widget | None, direction: int) -> Widget | None:
        """The field after (``direction`` 1) or before (-1) ``widget`` that can take the
        focus now; None when ``widget`` is no field here or the step leaves the form."""
        stops = self.tab_stops()
        at = self._tab_index.get(widget) if widget is not None else None
        if at is None:
            return None
        at += direction
        while 0 <= at < len(stops):
            if stops[at].focusable:
                return stops[at]
            at += direction
        return None

    def park(self) -> None:
        """Give the focus to the form itself (Escape in a field: the keys act on the pane
        again), now rather than at the next idle (the keys typed after the Escape are
        routed after the move)."""
        self._parking = True
        try:
            self.screen.set_focus(self)
        finally:
            self._parking = False

    @property
    def resume(self) -> bool:
        """Whether only cells without an ok row are to be previewed and run."""
        return self.query_one("#resume", Checkbox).value

    def compose(self) -> ComposeResult:
        """The campaign's settings first (what every plan sets), then the executors with
        their options, then resume: the order tab walks them in."""
        from engine.plugins import load_plugins
        from engine.registry import EXECUTORS

        # The executors (and their options) register when the plugins load: composed
        # before the catalogue worker loaded them, the form had no executor at all.
        load_plugins()
        section = ""
        for spec in self.fields:
            if spec.section != section:
                section = spec.section
                yield self._heading(section)
            with Horizontal(classes="row"):
                yield self._label(spec.id, spec.path, section)
                value = get_path(self.doc, spec.path)
                if spec.kind == "select":
                    yield FormSelect([(c, c) for c in spec.choices], id=spec.id,
                                 value=value if value in spec.choices else Select.NULL,
                                 allow_blank=spec.path != "watchdog.action",
                                 # Textual's blank reads "Select", as if it were a value
                                 prompt=spec.hint or "Select",
                                 tooltip=spec.help or None, compact=True)
                else:
                    if isinstance(value, list):  # a list field: "fp32, bf16"
                        value = ", ".join(map(str, value))
                    yield FormInput("" if value is None else str(value), id=spec.id,
                                placeholder=spec.hint or spec.help,
                                type=field_input_type(spec.kind), tooltip=spec.help or None,
                                compact=True)
        yield self._heading("executors")
        for name in EXECUTORS.names():
            spec = EXECUTORS.get(name)
            yield StateCheckbox(f"{name}: {spec.label}", name in self.doc["executors"],
                                id=f"exec-{name}", tooltip=spec.description, compact=True)
            if spec.description:
                yield Static(spec.description, classes="help")
            for (option, declared), (_, widget_id, hint) in zip(
                    spec.option_fields.items(), option_inputs(name), strict=True):
                with Horizontal(classes="row"):
                    yield self._label(widget_id, option, f"exec-{name}", indent="  ")
                    yield FormInput(placeholder=option_hint(declared), id=widget_id,
                                    tooltip=hint, compact=True,
                                    type=input_type(declared.types) if not declared.axis
                                    else "text")
        yield StateCheckbox("resume: preview and run only cells without an ok row",
                            False, id="resume", compact=True)

    def _label(self, field_id: str, path: str, section: str, indent: str = "") -> Label:
        """The label of field ``field_id`` (its dotted ``path``), remembered for the mark."""
        full, short = label_names(path)
        label = Label(indent + full, classes="label")
        self._rows[field_id] = _Row(label, full, short, section, indent)
        return label

    # -- sections and their jump keys ------------------------------------------------------
    def _heading(self, section: str) -> Label:
        """A section's title with its jump key (the user's keymap applied), ``#section-<name>``."""
        from textual.keys import format_key

        from fugue_tui.app.actions import by_id

        action = by_id(f"plan.section-{section}")
        keymap: dict[str, str] = getattr(self.app, "keymap", None) or {}
        keys = ", ".join(format_key(k.strip())
                         for k in keymap.get(action.id, action.key).split(",") if k.strip())
        return Label(Text.assemble(section, (f"  {keys}", "not bold dim")),
                     classes="heading", id=f"section-{section}")

    def section_start(self, section: str) -> Widget:
        """The first field of ``section`` (:data:`SECTIONS`)."""
        heading = self.query_one(f"#section-{section}")
        siblings = list(self.children)
        for widget in siblings[siblings.index(heading) + 1:]:
            for field in (widget, *widget.query("*")):
                if field.can_focus:
                    return field
        raise LookupError(section)

    def jump(self, section: str) -> None:
        """The focus on ``section``'s first field, now (the keys typed after the jump are
        routed after the move), its title scrolled to the top of the form."""
        self.screen.set_focus(self.section_start(section), scroll_visible=False)
        self.scroll_to_widget(self.query_one(f"#section-{section}"), top=True, animate=False,
                              immediate=True)
        self.scroll_drawn_now()

    def scroll_drawn_now(self) -> None:
        """The form's scroll drawn in the frame that shows the focus, not a frame later, and
        as a layout of the screen: a scroll's own refresh (Textual's ``reflow_visible``)
        took in the footer's keys shown or hidden by the same key (their display already
        set, their layout message not yet read) without drawing them, and the footer stayed
        half drawn (``? help results`` for ``? help  f3 all results``) until the next full
        frame."""
        self.refresh(layout=True)
        repaint_now(self)

    # -- where the keys go, readable without colour ----------------------------------------
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.mark(event.widget, True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self.mark(event.widget, False)

    def mark(self, widget: Widget | None, focused: bool) -> None:
        """``> passes`` on the focused field's label (a checkbox: on its own label); nothing
        when it shows already (an update repaints). The plan screen calls it as the focus
        moves (:meth:`fugue_tui.app.screens.plan.PlanScreen.set_focus`), so that the mark
        is drawn in the same frame as the focus; the focus messages, a few hops later, came
        a frame (tens of milliseconds) after it."""
        if widget is None or self not in widget.ancestors:
            return
        if isinstance(widget, Checkbox):
            base = str(widget.label).removeprefix(FOCUS_MARK)
            if str(widget.label) != (shown := FOCUS_MARK + base if focused else base):
                widget.label = shown
                repaint_now(widget)  # in the frame that shows the focus
            return
        row = self._rows.get(widget.id or "")
        if row is None:
            return
        if str(row.label.content) != (shown := row.text(focused)):
            # No layout: the label's box is fixed (its width by the CSS, its row one line
            # high); a layout of the screen at each Tab was most of what remained of its
            # time.
            row.label.update(shown, layout=False)
            repaint_now(row.label)  # in the frame that shows the focus, not the next one

    def on_resize(self, event: events.Resize | None = None) -> None:
        self.call_after_refresh(self._fit_hints)
        self.call_after_refresh(self._fit_labels)

    def _fit_labels(self) -> None:
        """Each section's labels by their dotted names where every one fits with the focus
        mark in its box, else by their keys (the section's title names the table), so that
        the focused label stays whole and the section reads alike whichever has the focus."""
        rows = list(self._rows.values())
        if not rows or (width := rows[0].label.content_size.width) <= 0:
            return  # not laid out yet: the next resize fits them
        crowded = {row.section for row in rows
                   if len(FOCUS_MARK) + len(row.full) > width}
        focused = self.screen.focused
        for field_id, row in self._rows.items():
            row.short_shown = row.section in crowded
            shown = row.text(focused is not None and focused.id == field_id)
            if str(row.label.content) != shown:
                row.label.update(shown, layout=False)

    def _fit_hints(self) -> None:
        """Each placeholder cut to its box at a word, with an ellipsis."""
        for box in self.query(Input):
            full = self._full_hints.setdefault(box, str(box.placeholder))
            width = box.content_size.width
            if width > 0:
                box.placeholder = fit_hint(full, width)

    def _field(self, widget_id: str | None) -> Field | None:
        return next((f for f in self.fields if f.id == widget_id), None)

    def on_input_changed(self, event: Input.Changed) -> None:
        widget_id = event.input.id or ""
        if widget_id.startswith("opt-"):
            self._option_changed(widget_id, event.value)
        elif (spec := self._field(widget_id)) is not None:
            self._setting_changed(spec, event.value)
        else:
            return
        self.post_message(self.Changed())

    def _setting_changed(self, spec: Field, text: str) -> None:
        self.errors.pop(spec.path, None)
        if spec.path == "max_parallel":
            self._max_parallel(text.strip())
            return
        error = set_setting(self.doc, spec, text)
        if error:
            self.errors[spec.path] = error
        elif spec.path in DEVICE_PAIR and text.strip():
            self._unset_partner(spec.path)
        elif spec.path == "experiments_file" and text.strip():
            self.post_message(self.ExperimentsFileChanged(get_path(self.doc, spec.path)))

    def _max_parallel(self, text: str) -> None:
        """The campaign-wide max_parallel, shown in each executor's own box too."""
        error, written = set_max_parallel(self.doc, text)
        if error:
            self.errors["max_parallel"] = error
            return
        for name in written:
            box = self.query(f"#opt-{name}-max_parallel")
            if box:
                with self.prevent(Input.Changed):
                    box.first(Input).value = text

    def _option_changed(self, widget_id: str, text: str) -> None:
        _, executor, option = widget_id.split("-", 2)
        key = f"options.{executor}.{option}"
        self.errors.pop(key, None)
        error = set_option(self.doc, executor, option, text)
        if error:
            self.errors[key] = error

    def on_select_changed(self, event: Select.Changed) -> None:
        spec = self._field(event.select.id)
        if spec is None:
            return
        set_path(self.doc, spec.path, None if event.value is Select.NULL else str(event.value))
        if event.value is not Select.NULL:
            self._unset_partner(spec.path)
        self.post_message(self.Changed())

    def _unset_partner(self, path: str) -> None:
        """``device`` chosen: ``devices`` emptied, and the other way round (one setting:
        a campaign file sets one of them)."""
        partner = self._field_by_path(DEVICE_PAIR.get(path, ""))
        if partner is None:
            return
        set_path(self.doc, partner.path, None)
        self.errors.pop(partner.path, None)
        with self.prevent(Input.Changed, Select.Changed):
            widget = self.query_one(f"#{partner.id}")
            if isinstance(widget, Select):
                widget.value = Select.NULL
            elif isinstance(widget, Input):
                widget.value = ""

    def _field_by_path(self, path: str) -> Field | None:
        return next((f for f in self.fields if f.path == path), None)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        widget_id = event.checkbox.id or ""
        if widget_id.startswith("exec-"):
            from engine.registry import EXECUTORS

            chosen = {n for n in EXECUTORS.names()
                      if self.query_one(f"#exec-{n}", Checkbox).value}
            self.doc["executors"] = [n for n in EXECUTORS.names() if n in chosen]
        self.post_message(self.Changed())

    def fill(self) -> None:
        """Show ``self.doc`` in the form (without triggering change handlers)."""
        from engine.registry import EXECUTORS

        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):
            for spec in self.fields:
                shown = shown_value(self.doc, spec)
                if spec.kind == "select":
                    self.query_one(f"#{spec.id}", Select).value = \
                        Select.NULL if shown is None else shown
                else:
                    self.query_one(f"#{spec.id}", Input).value = shown or ""
            executors = plan_executors(self.doc)
            options = self.doc.get("options") or {}
            for name in EXECUTORS.names():
                self.query_one(f"#exec-{name}", Checkbox).value = name in executors
                for option in EXECUTORS.get(name).option_fields:
                    value = options.get(name, {}).get(option)
                    self.query_one(f"#opt-{name}-{option}", Input).value = format_option(value)
        self.errors.clear()
