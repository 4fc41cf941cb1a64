"""The campaign settings form of the plan screen: the campaign's fields first (name, passes,
seed, retries, max_parallel, threads, device, compile, runs folder, experiments file,
watchdog), then the executors (with their options) and the resume box — the order tab walks
them in. Checkboxes show their state as ``X`` or blank, readable without colour.

The form edits a campaign document (:mod:`fugue_tui.app.models.plan`) in place, ``doc``, and
keeps one error per field that does not parse, ``errors``. After every edit it posts
:class:`CampaignForm.Changed` (the screen re-previews the plan), and when the experiments file
is set, :class:`CampaignForm.ExperimentsFileChanged` first (the screen reloads the catalogue).
:meth:`CampaignForm.fill` shows a document that was loaded, without posting either.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static

from fugue_tui.app.models.form_fields import (
    Field,
    campaign_fields,
    checked_value,
    field_input_type,
    fit_hint,
    format_option,
    get_path,
    input_type,
    option_hint,
    option_inputs,
    parse_option,
    set_path,
)
from fugue_tui.app.models.plan import PlanDoc

#: The name the form's fields had here (tests read them through it).
_fields = campaign_fields

#: Re-exported: the form's fields are read where they are shown (tests, the docs).
__all__ = ["FOCUS_MARK", "CampaignForm", "Field", "StateCheckbox", "fit_hint", "input_type",
           "option_hint", "option_inputs"]


#: What marks the focused field's label: a plain character, so that a capture without
#: colours (tmux capture-pane -p, NO_COLOR) still shows where the keys go.
FOCUS_MARK = "> "


class StateCheckbox(Checkbox):
    """A checkbox whose state reads without colour (``NO_COLOR``, a monochrome terminal):
    ``X`` in the box when ticked, blank when not (Textual draws an ``X`` either way and
    tells them apart by colour alone)."""

    @property
    # A property where Checkbox has a class attribute: the mark depends on the value.
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 (Textual's name)
        return "X" if self.value else " "


class CampaignForm(VerticalScroll):
    """The campaign settings form (see the module docstring)."""

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
        yield Label("campaign", classes="heading")
        for spec in self.fields:
            with Horizontal(classes="row"):
                yield Label(spec.path, classes="label")
                value = get_path(self.doc, spec.path)
                if spec.kind == "select":
                    yield Select([(c, c) for c in spec.choices], id=spec.id,
                                 value=value if value in spec.choices else Select.NULL,
                                 allow_blank=spec.path != "watchdog.action",
                                 # Textual's blank reads "Select", as if it were a value
                                 prompt=spec.hint or "Select",
                                 tooltip=spec.help or None, compact=True)
                else:
                    if isinstance(value, list):  # a list field: "fp32, bf16"
                        value = ", ".join(map(str, value))
                    yield Input("" if value is None else str(value), id=spec.id,
                                placeholder=spec.hint or spec.help,
                                type=field_input_type(spec.kind), tooltip=spec.help or None,
                                compact=True)
        yield Label("executors", classes="heading")
        for name in EXECUTORS.names():
            spec = EXECUTORS.get(name)
            yield StateCheckbox(f"{name}: {spec.label}", name in self.doc["executors"],
                                id=f"exec-{name}", tooltip=spec.description, compact=True)
            if spec.description:
                yield Static(spec.description, classes="help")
            for (option, declared), (_, widget_id, hint) in zip(
                    spec.option_fields.items(), option_inputs(name), strict=True):
                with Horizontal(classes="row"):
                    yield Label(f"  {option}", classes="label")
                    yield Input(placeholder=option_hint(declared), id=widget_id, tooltip=hint,
                                type=input_type(declared.types) if not declared.axis
                                else "text", compact=True)
        yield StateCheckbox("resume: preview and run only cells without an ok row",
                            False, id="resume", compact=True)

    # -- where the keys go, readable without colour ----------------------------------------
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark(event.widget, True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._mark(event.widget, False)

    def _mark(self, widget: Widget, focused: bool) -> None:
        """``> passes`` on the focused field's label (a checkbox: on its own label)."""
        if isinstance(widget, Checkbox):
            base = str(widget.label).removeprefix(FOCUS_MARK)
            widget.label = FOCUS_MARK + base if focused else base
            return
        row = widget.parent
        if not isinstance(row, Horizontal) or not row.has_class("row"):
            return
        label = row.query_one(".label", Label)
        base = str(label.content).removeprefix(FOCUS_MARK).removeprefix("  ")
        label.update(FOCUS_MARK + base if focused else ("  " + base if widget.id and
                                                         widget.id.startswith("opt-")
                                                         else base))

    def on_resize(self, event: events.Resize | None = None) -> None:
        self.call_after_refresh(self._fit_hints)

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
        text = text.strip()
        if spec.path == "max_parallel":
            self._max_parallel(text)
            return
        if not text:
            set_path(self.doc, spec.path, None)
            return
        if spec.kind == "list":  # checked by the preview (parse_campaign), like a file's
            names = [t.strip() for t in text.split(",") if t.strip()]
            set_path(self.doc, spec.path, names[0] if len(names) == 1 else names)
            return
        checked = checked_value(spec, text)
        if isinstance(checked, str):
            self.errors[spec.path] = checked
            return
        if checked is not None:
            set_path(self.doc, spec.path, checked[0])
            return
        try:
            value: Any = {"int": int, "float": float}.get(spec.kind, str)(text)
        except ValueError:
            self.errors[spec.path] = f"{spec.path}: not a number: {text!r}"
            return
        set_path(self.doc, spec.path, value)
        if spec.path == "experiments_file":
            self.post_message(self.ExperimentsFileChanged(value))

    def _max_parallel(self, text: str) -> None:
        """The campaign-wide max_parallel: written into every selected executor that
        declares the option (it is an executor option in the campaign file)."""
        from engine.executors import check_max_parallel
        from engine.registry import EXECUTORS

        try:
            value: Any = int(text) if text else None
        except ValueError:
            value = text  # "auto": estimated from this machine's profiles
        try:
            if value is not None:
                check_max_parallel(value)
        except ValueError as exc:
            self.errors["max_parallel"] = f"max_parallel: {exc}"
            return
        for name in EXECUTORS.names():
            if "max_parallel" in EXECUTORS.get(name).option_fields:
                set_path(self.doc, f"options.{name}.max_parallel", value)
                box = self.query(f"#opt-{name}-max_parallel")
                if box:
                    with self.prevent(Input.Changed):
                        box.first(Input).value = text

    def _option_changed(self, widget_id: str, text: str) -> None:
        from engine.registry import EXECUTORS

        _, executor, option = widget_id.split("-", 2)
        spec = EXECUTORS.get(executor)
        key = f"options.{executor}.{option}"
        self.errors.pop(key, None)
        try:
            declared = spec.option_fields[option]
            value = parse_option(text, declared.types, axis=declared.axis)
        except ValueError as exc:
            self.errors[key] = f"{key}: {exc}"
            return
        set_path(self.doc, key, value)
        if not self.doc.get("options", {}).get(executor):
            self.doc.get("options", {}).pop(executor, None)

    def on_select_changed(self, event: Select.Changed) -> None:
        spec = self._field(event.select.id)
        if spec is None:
            return
        set_path(self.doc, spec.path, None if event.value is Select.NULL else str(event.value))
        self.post_message(self.Changed())

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
        from engine.define.campaign_schema import default as campaign_default
        from engine.registry import EXECUTORS

        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):
            for spec in self.fields:
                value = get_path(self.doc, spec.path)
                if spec.path == "max_parallel":
                    values = {v.get("max_parallel") for v in (self.doc.get("options") or {}).values()
                              if isinstance(v, dict) and "max_parallel" in v}
                    value = values.pop() if len(values) == 1 else None
                if spec.kind == "select":
                    widget = self.query_one(f"#{spec.id}", Select)
                    widget.value = value if value in spec.choices else (
                        Select.NULL if spec.path != "watchdog.action" else "flag")
                elif spec.kind in ("list", "ints"):
                    self.query_one(f"#{spec.id}", Input).value = (
                        ", ".join(map(str, value)) if isinstance(value, list)
                        else ("" if value is None else str(value)))
                else:
                    self.query_one(f"#{spec.id}", Input).value = "" if value is None else str(value)
            # No executor set: the campaign's declared default (the baseline executor).
            executors = self.doc.get("executors") or campaign_default("executors")
            executors = [executors] if isinstance(executors, str) else executors
            for name in EXECUTORS.names():
                self.query_one(f"#exec-{name}", Checkbox).value = name in executors
                for option in EXECUTORS.get(name).option_fields:
                    value = (self.doc.get("options") or {}).get(name, {}).get(option)
                    self.query_one(f"#opt-{name}-{option}", Input).value = format_option(value)
        self.errors.clear()
