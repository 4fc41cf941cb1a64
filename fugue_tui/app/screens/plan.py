"""The plan screen: pick experiments and executors, set the campaign, preview its cells,
save or load it as a campaign TOML file, and launch it.

The plan is a campaign document (:mod:`fugue_tui.app.plan_model`); every edit re-runs the
runner's dry run in a thread worker (debounced, stale results dropped by revision), so the
preview shows exactly the cells, keys and skips the runner would.

| key | binding id | action |
|---|---|---|
| space | plan.toggle | select the experiment (or group) under the cursor |
| a | plan.select-available | select every experiment that can run here |
| c | plan.clear | clear the selection |
| ctrl+r | plan.launch | launch the campaign |
| ctrl+s | plan.save | save as campaign TOML |
| ctrl+o | plan.load | load a campaign TOML |
| ctrl+t | plan.attach | attach to a running campaign |
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Checkbox, DataTable, Input, Label, Select, Static

from engine.errors import FugueError
from fugue_tui.app.actions import PLAN, bindings
from fugue_tui.app.messages import CatalogueLoaded, Launched, PlanLoaded, PreviewReady
from fugue_tui.app.plan_model import (
    Preview,
    default_doc,
    format_option,
    load_plan,
    parse_option,
    parse_plan,
    preview,
    save_plan,
)
from fugue_tui.app.screens.modals import PathScreen
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree, ExperimentInfo
from fugue_tui.app.widgets.cell_table import split_label
from fugue_tui.app.widgets.footer import KeyFooter

#: Seconds of quiet after an edit before the preview is recomputed.
PREVIEW_DEBOUNCE_S = 0.25


@dataclass(frozen=True)
class Field:
    """One campaign setting in the form: ``path`` in the document (``watchdog.action``),
    kind ``text`` | ``int`` | ``float`` | ``select``, and the choices of a select."""

    path: str
    kind: str
    choices: tuple[str, ...] = ()
    help: str = ""

    @property
    def id(self) -> str:
        return "f-" + self.path.replace(".", "-").replace("_", "-")


def _fields() -> tuple[Field, ...]:
    from engine.define.campaign import COMPILE_CHOICES, COMPILE_MODES
    from engine.define.watchdog_settings import ACTIONS

    return (
        Field("name", "text", help="run folder <runs_dir>/<name>"),
        Field("passes", "int", help="repeats of the whole matrix"),
        Field("seed", "int", help="job i gets seed + i"),
        Field("retries", "int", help="automatic retries of a failed or hung cell"),
        Field("max_parallel", "int", help="most jobs at once, for executors that run jobs "
                                          "concurrently (sets [options.<executor>] max_parallel)"),
        Field("threads", "int", help="torch threads per cell; 0 = all cores"),
        Field("device", "select", ("auto", "cpu", "cuda")),
        Field("compile", "select", COMPILE_CHOICES, help="torch.compile: off, on or both"),
        Field("compile_mode", "select", COMPILE_MODES),
        Field("runs_dir", "text", help="relative to the working directory"),
        Field("experiments_file", "text", help="a user catalogue merged over the built-in one"),
        Field("watchdog.action", "select", ACTIONS,
              help="flag: mark a hung cell and wait for you; kill: kill and retry it"),
        Field("watchdog.interval_s", "float", help="seconds between checks"),
        Field("watchdog.suspect_after", "int", help="quiet checks before 'suspect'"),
        Field("watchdog.hung_after", "int", help="quiet checks before 'hung'"),
    )


def _get(doc: dict[str, Any], path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    if value is None:
        doc.pop(last, None)
    else:
        doc[last] = value


def experiment_infos(experiments_file: str | None) -> list[ExperimentInfo]:
    """The catalogue (merged with ``experiments_file``) with availability, for the tree.

    Raises:
        ConfigError: the experiments file is malformed (names the file and key).
    """
    from engine.define.availability import experiment_availability
    from engine.define.catalogue import load_catalogue
    from engine.plugins import load_plugins

    load_plugins()
    catalogue = load_catalogue(experiments_file or None)
    out = []
    for exp in catalogue.experiments.values():
        ok, reason = experiment_availability(exp)
        models = ",".join(dict.fromkeys(exp.models()))
        datasets = ",".join(dict.fromkeys(exp.datasets()))
        what = f"{models}/{datasets}"
        if len(what) > 34:
            what = what[:33] + "…"
        summary = f"{exp.type} · {what} · K {exp.k}" + (f" · {exp.size}" if exp.size else "")
        out.append(ExperimentInfo(exp.id, exp.family, exp.type, summary, ok, reason,
                                  exp.description))
    return out


class PlanScreen(Screen):
    """Plan a campaign; see the module docstring for keys."""

    BINDINGS = bindings(tuple(a for a in PLAN if a.id != "plan.toggle"))

    def __init__(self, runs_dir: str = "runs", campaign: str | None = None) -> None:
        super().__init__()
        self.doc: dict[str, Any] = default_doc(runs_dir)
        self.fields = _fields()
        self.source_path: Path | None = None
        self.source_doc: dict[str, Any] | None = None
        self.initial_campaign = campaign
        self.revision = 0
        self.result: Preview | None = None
        self.result_revision = -1
        self.form_errors: dict[str, str] = {}
        self.catalogue_file: str | None = None
        self._debounce: Timer | None = None
        self.launching = False

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        from engine.define.campaign import PLANNED_EXECUTORS
        from engine.plugins import load_builtins
        from engine.registry import EXECUTORS

        load_builtins()
        yield Static(Text("fugue-tui · plan a campaign", style="bold"), id="title")
        with Horizontal(id="plan-top"):
            with Vertical(id="catalogue-pane"):
                yield CatalogueTree(id="catalogue")
                yield Static("", id="exp-details")
            with VerticalScroll(id="settings"):
                yield Label("executors", classes="heading")
                for name in EXECUTORS.names():
                    spec = EXECUTORS.get(name)
                    yield Checkbox(f"{name}: {spec.label}", name in self.doc["executors"],
                                   id=f"exec-{name}", tooltip=spec.description, compact=True)
                    if spec.description:
                        yield Static(spec.description, classes="help")
                    choices = getattr(spec, "choices", {}) or {}
                    for option, types in spec.options.items():
                        hint = spec.option_help.get(option, "")
                        if option in choices:
                            hint = f"{'|'.join(choices[option])}  {hint}"
                        with Horizontal(classes="row"):
                            yield Label(f"  {option}", classes="label")
                            yield Input(placeholder=hint, id=f"opt-{name}-{option}",
                                        tooltip=hint, compact=True)
                for name in PLANNED_EXECUTORS:
                    if name not in EXECUTORS:
                        yield Static(f"{name}: not built yet in this version",
                                     classes="help disabled")
                yield Label("campaign", classes="heading")
                for spec in self.fields:
                    with Horizontal(classes="row"):
                        yield Label(spec.path, classes="label")
                        value = _get(self.doc, spec.path)
                        if spec.kind == "select":
                            yield Select([(c, c) for c in spec.choices], id=spec.id,
                                         value=value if value in spec.choices else Select.NULL,
                                         allow_blank=spec.path != "watchdog.action",
                                         tooltip=spec.help or None, compact=True)
                        else:
                            yield Input("" if value is None else str(value), id=spec.id,
                                        placeholder=spec.help,
                                        type={"int": "integer", "float": "number"}.get(
                                            spec.kind, "text"), tooltip=spec.help or None,
                                        compact=True)
                yield Checkbox("resume: preview and run only cells without an ok row",
                               False, id="resume", compact=True)
        with Vertical(id="preview-pane"):
            yield Static("", id="preview-summary")
            yield DataTable(id="preview", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#preview", DataTable)
        for column in ("#", "experiment", "executor", "configuration", "pass", "jobs",
                       "cell key", "would"):
            table.add_column(column, key=column)
        self.query_one(CatalogueTree).focus()
        self._load_catalogue(self.doc.get("experiments_file"))
        if self.initial_campaign:
            self._load_file(self.initial_campaign)
        self.schedule_preview()

    # -- catalogue ------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="catalogue")
    def _load_catalogue(self, experiments_file: str | None) -> None:
        try:
            infos = experiment_infos(experiments_file)
        except FugueError as exc:
            self.post_message(CatalogueLoaded([], str(exc), experiments_file or ""))
            return
        self.post_message(CatalogueLoaded(infos, "", experiments_file or ""))

    def on_catalogue_loaded(self, message: CatalogueLoaded) -> None:
        tree = self.query_one(CatalogueTree)
        if message.error:
            self.form_errors["experiments_file"] = message.error
            self._show_summary()
            self.notify(message.error, severity="error", timeout=10, markup=False)
            return
        self.form_errors.pop("experiments_file", None)
        self.catalogue_file = message.source or None
        tree.load(message.experiments, list(self.doc.get("experiments") or []))
        unknown = [e for e in self.doc.get("experiments") or [] if e not in tree.experiments]
        if unknown:
            self.notify(f"not in the catalogue: {', '.join(unknown)}", severity="warning", markup=False)
        self._show_details()
        self.schedule_preview()

    def on_catalogue_tree_selection_changed(self, message: CatalogueTree.SelectionChanged) -> None:
        self.doc["experiments"] = message.selected
        self.schedule_preview()

    def on_tree_node_highlighted(self) -> None:
        self._show_details()

    def on_tree_node_selected(self, event) -> None:
        tree = self.query_one(CatalogueTree)
        if event.node.data and not str(event.node.data).startswith("group:"):
            tree.action_toggle()  # Enter on an experiment selects it too

    def _show_details(self) -> None:
        exp = self.query_one(CatalogueTree).highlighted_experiment()
        details = self.query_one("#exp-details", Static)
        if exp is None:
            details.update(Text("space selects · a: all that run here · c: clear", style="dim"))
            return
        text = Text(f"{exp.id}: {exp.description or exp.summary}\n")
        if exp.available:
            text.append("can run here", style="green")
        else:
            text.append(f"unavailable: {exp.reason}", style="yellow")
        details.update(text)

    def action_select_available(self) -> None:
        tree = self.query_one(CatalogueTree)
        tree.set_selected(tree.selected | {e.id for e in tree.experiments.values() if e.available})

    def action_clear_selection(self) -> None:
        self.query_one(CatalogueTree).set_selected(set())

    # -- form -----------------------------------------------------------------------------
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
        self.schedule_preview()

    def _setting_changed(self, spec: Field, text: str) -> None:
        self.form_errors.pop(spec.path, None)
        text = text.strip()
        if spec.path == "max_parallel":
            self._max_parallel(text)
            return
        if not text:
            _set(self.doc, spec.path, None)
            return
        try:
            value: Any = {"int": int, "float": float}.get(spec.kind, str)(text)
        except ValueError:
            self.form_errors[spec.path] = f"{spec.path}: not a number: {text!r}"
            return
        _set(self.doc, spec.path, value)
        if spec.path == "experiments_file" and value != self.catalogue_file:
            self._load_catalogue(value)

    def _max_parallel(self, text: str) -> None:
        """The campaign-wide max_parallel: written into every selected executor that
        declares the option (it is an executor option in the campaign file)."""
        from engine.registry import EXECUTORS

        try:
            value = int(text) if text else None
        except ValueError:
            self.form_errors["max_parallel"] = f"max_parallel: not an integer: {text!r}"
            return
        for name in EXECUTORS.names():
            if "max_parallel" in EXECUTORS.get(name).options:
                _set(self.doc, f"options.{name}.max_parallel", value)
                box = self.query(f"#opt-{name}-max_parallel")
                if box:
                    with self.prevent(Input.Changed):
                        box.first(Input).value = text

    def _option_changed(self, widget_id: str, text: str) -> None:
        from engine.registry import EXECUTORS

        _, executor, option = widget_id.split("-", 2)
        spec = EXECUTORS.get(executor)
        key = f"options.{executor}.{option}"
        self.form_errors.pop(key, None)
        try:
            value = parse_option(text, spec.options[option],
                                 axis=option in (getattr(spec, "axes", ()) or ()))
        except ValueError as exc:
            self.form_errors[key] = f"{key}: {exc}"
            return
        _set(self.doc, key, value)
        if not self.doc.get("options", {}).get(executor):
            self.doc.get("options", {}).pop(executor, None)

    def on_select_changed(self, event: Select.Changed) -> None:
        spec = self._field(event.select.id)
        if spec is None:
            return
        _set(self.doc, spec.path, None if event.value is Select.NULL else str(event.value))
        self.schedule_preview()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        widget_id = event.checkbox.id or ""
        if widget_id.startswith("exec-"):
            from engine.registry import EXECUTORS

            chosen = {n for n in EXECUTORS.names()
                      if self.query_one(f"#exec-{n}", Checkbox).value}
            self.doc["executors"] = [n for n in EXECUTORS.names() if n in chosen]
        self.schedule_preview()

    def _fill_form(self) -> None:
        """Show ``self.doc`` in the form (without triggering change handlers)."""
        from engine.registry import EXECUTORS

        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):
            for spec in self.fields:
                value = _get(self.doc, spec.path)
                if spec.path == "max_parallel":
                    values = {v.get("max_parallel") for v in (self.doc.get("options") or {}).values()
                              if isinstance(v, dict) and "max_parallel" in v}
                    value = values.pop() if len(values) == 1 else None
                if spec.kind == "select":
                    widget = self.query_one(f"#{spec.id}", Select)
                    widget.value = value if value in spec.choices else (
                        Select.NULL if spec.path != "watchdog.action" else "flag")
                else:
                    self.query_one(f"#{spec.id}", Input).value = "" if value is None else str(value)
            executors = self.doc.get("executors") or ["seq"]
            executors = [executors] if isinstance(executors, str) else executors
            for name in EXECUTORS.names():
                self.query_one(f"#exec-{name}", Checkbox).value = name in executors
                for option in EXECUTORS.get(name).options:
                    value = (self.doc.get("options") or {}).get(name, {}).get(option)
                    self.query_one(f"#opt-{name}-{option}", Input).value = format_option(value)
        self.form_errors.clear()

    # -- preview --------------------------------------------------------------------------
    def schedule_preview(self) -> None:
        """Recompute the preview after :data:`PREVIEW_DEBOUNCE_S` of quiet."""
        self.revision += 1
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(PREVIEW_DEBOUNCE_S, self._start_preview)

    def _start_preview(self) -> None:
        if self.form_errors:
            self.result = None
            self._show_summary()
            return
        resume = self.query_one("#resume", Checkbox).value
        self._preview(copy.deepcopy(self.doc), self.revision, resume)

    @work(thread=True, exclusive=True, group="preview")
    def _preview(self, doc: dict[str, Any], revision: int, resume: bool) -> None:
        self.post_message(PreviewReady(preview(doc, resume=resume), revision))

    def on_preview_ready(self, message: PreviewReady) -> None:
        if message.revision != self.revision:
            return  # an edit came after this preview started
        self.result, self.result_revision = message.preview, message.revision
        table = self.query_one("#preview", DataTable)
        table.clear()
        for planned in self.result.cells:
            cell = planned.cell
            _, _, config, _ = split_label(cell.label)
            would = Text(f"skip: {planned.skip}", style="yellow") if planned.skip else Text("run")
            table.add_row(str(cell.index), cell.exp_id, cell.executor, config or "–",
                          str(cell.pass_index), str(len(cell.jobs)), cell.key, would,
                          key=cell.key)
        self._show_summary()

    def _show_summary(self) -> None:
        summary = self.query_one("#preview-summary", Static)
        if self.form_errors:
            summary.update(Text(next(iter(self.form_errors.values())), style="bold red"))
            return
        if self.result is None:
            summary.update(Text("preview: computing…", style="dim"))
            return
        if self.result.error:
            summary.update(Text(f"preview: {self.result.error}", style="bold red"))
            return
        text = Text(f"preview: {self.result.summary()}", style="bold")
        text.append("  ·  ctrl+r launch · ctrl+s save · ctrl+o load", style="dim")
        for warning in self.result.warnings:
            text.append(f"\nwarning: {warning}", style="yellow")
        summary.update(text)

    # -- files ----------------------------------------------------------------------------
    def action_save(self) -> None:
        default = str(self.source_path or Path("campaigns") / f"{self.doc.get('name') or 'campaign'}.toml")
        self.app.push_screen(PathScreen("Save the plan as a campaign TOML file:", default),
                             self._save_to)

    def _save_to(self, path: str | None) -> None:
        if path:
            self._save_worker(copy.deepcopy(self.doc), path)

    @work(thread=True, exclusive=True, group="file")
    def _save_worker(self, doc: dict[str, Any], path: str) -> None:
        try:
            written = save_plan(doc, path)
        except FugueError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10,
                                      markup=False)
            return
        self.app.call_from_thread(self._saved, written, doc)

    def _saved(self, path: Path, doc: dict[str, Any]) -> None:
        self.source_path, self.source_doc = path, doc
        self.notify(f"saved {path}", markup=False)

    def action_load(self) -> None:
        default = str(self.source_path or "campaigns/")
        self.app.push_screen(PathScreen("Load a campaign TOML file:", default), self._load_file)

    def _load_file(self, path: str | None) -> None:
        if path:
            self._load_worker(path)

    @work(thread=True, exclusive=True, group="file")
    def _load_worker(self, path: str) -> None:
        try:
            self.post_message(PlanLoaded(path, load_plan(path)))
        except FugueError as exc:
            self.post_message(PlanLoaded(path, None, str(exc)))

    def on_plan_loaded(self, message: PlanLoaded) -> None:
        if message.doc is None:
            self.notify(message.error, title="cannot load the campaign", severity="error",
                        timeout=15, markup=False)
            self.query_one("#preview-summary", Static).update(
                Text(f"not loaded: {message.error}", style="bold red"))
            return
        self.doc = message.doc
        self.source_path, self.source_doc = Path(message.path), copy.deepcopy(message.doc)
        self._fill_form()
        tree = self.query_one(CatalogueTree)
        if self.doc.get("experiments_file") != self.catalogue_file:
            self._load_catalogue(self.doc.get("experiments_file"))
        else:
            tree.set_selected(self.doc.get("experiments") or [], notify=False)
        self.notify(f"loaded {message.path}", markup=False)
        self.schedule_preview()

    # -- launch ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launch":
            return None if self.launching else True
        return True

    def action_launch(self) -> None:
        if self.form_errors:
            self.notify(next(iter(self.form_errors.values())), severity="error", markup=False)
            return
        if self.result is None or self.result.error or self._debounce_pending():
            self.notify(self.result.error if self.result and self.result.error
                        else "the preview is not ready yet", severity="error", markup=False)
            return
        if not self.result.runs:
            self.notify("nothing to run: every cell would be skipped", severity="warning", markup=False)
            return
        self.launching = True
        resume = self.query_one("#resume", Checkbox).value
        self._launch(copy.deepcopy(self.doc), resume)

    def _debounce_pending(self) -> bool:
        """True while the preview shown is older than the plan (an edit is being previewed)."""
        return self.result_revision != self.revision

    @work(thread=True, exclusive=True, group="launch")
    def _launch(self, doc: dict[str, Any], resume: bool) -> None:
        from engine.observe.follow import last_session_offset
        from engine.results.preflight import preflight
        from fugue_tui.app.process import find_runner, runner_argv, start_runner

        run_dir = ""
        try:
            campaign = parse_plan(doc)
            run_dir = str(Path(campaign.runs_dir) / campaign.name)
            existing = find_runner(run_dir)
            if existing is not None:
                self.post_message(Launched(run_dir, existing, last_session_offset(run_dir),
                                           attach=True))
                return
            preflight(campaign.runs_dir)
            if self.source_path is not None and doc == self.source_doc:
                path = self.source_path
            else:  # the plan as edited, kept beside the runs like `fugue-tui run` does
                path = save_plan(doc, Path(campaign.runs_dir) / ".dashboard" /
                                 f"{campaign.name}.toml")
            runner_log = Path(run_dir) / "runner.jsonl"
            offset = runner_log.stat().st_size if runner_log.exists() else 0
            argv = runner_argv(path, resume=resume,
                               watchdog_action=(doc.get("watchdog") or {}).get("action"))
            handle = start_runner(run_dir, argv)
        except (FugueError, OSError) as exc:
            self.post_message(Launched(run_dir, error=str(exc)))
            return
        self.post_message(Launched(run_dir, handle, offset))

    def on_launched(self, message: Launched) -> None:
        self.launching = False
        if message.error:
            self.notify(message.error, title="not launched", severity="error", timeout=15, markup=False)
            return
        if message.attach:
            self.notify(f"{message.run_dir} is already running: attached to it",
                        severity="warning", markup=False)
        self.app.open_run(Path(message.run_dir), message.handle, message.offset,
                          attached=message.attach)

    def action_attach(self) -> None:
        self._find_running(str(self.doc.get("runs_dir") or "runs"))

    @work(thread=True, exclusive=True, group="attach")
    def _find_running(self, runs_dir: str) -> None:
        from fugue_tui.app.process import running_campaigns

        found = running_campaigns(runs_dir)
        default = str(found[0]) if found else str(Path(runs_dir) / str(self.doc.get("name")))
        self.app.call_from_thread(
            self.app.push_screen,
            PathScreen(f"Attach to the run folder of a campaign ({len(found)} running under "
                       f"{runs_dir}):", default),
            lambda path: self.app.attach(path) if path else None)
