"""The plan's settings form, Textual-free: which fields it shows (generated from the
campaign keys and the executors' declared options), their placeholders, and how the text
typed into one becomes the campaign document's value (or a one-line error).

:class:`fugue_tui.app.widgets.campaign_form.CampaignForm` lays these out and edits the plan
(:data:`fugue_tui.app.models.plan.PlanDoc`) with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fugue_tui.app.models.option_text import parse_option
from fugue_tui.app.models.plan import DEFAULT_WATCHDOG_ACTION, PlanDoc

if TYPE_CHECKING:
    from engine.define.executor_options import OptionField

@dataclass(frozen=True)
class Field:
    """One campaign setting in the form: ``path`` in the document (``watchdog.action``),
    kind ``text`` | ``int`` | ``float`` | ``select`` | ``list`` (a comma list of names, one
    cell each; one name is written as a plain value) | ``ints`` (a comma list of integers,
    always a list: ``k_sweep``) | ``size`` (``6GiB``, ``512MiB`` or a number of MiB:
    ``[budget]``) | ``devices`` (``auto``, ``cpu`` or a comma list of devices, checked as
    the runner checks it: a list when several, one value as a plain string), and the
    choices of a select or list."""

    path: str
    kind: str
    choices: tuple[str, ...] = ()
    help: str = ""
    #: The empty field's placeholder: a default or an example, worded so that it cannot be
    #: taken for a value (a placeholder is dim, which a plain capture does not show).
    hint: str = ""

    @property
    def id(self) -> str:
        return "f-" + self.path.replace(".", "-").replace("_", "-")

    @property
    def section(self) -> str:
        """The form's section the field is shown in (:func:`field_section`)."""
        return field_section(self.path)


#: The form's sections in the order shown, each with a jump key (``plan.section-<name>``
#: in :mod:`fugue_tui.app.actions`): the campaign's own keys, its ``[watchdog]`` and
#: ``[budget]`` tables, then the executors (with their options) and resume.
SECTIONS = ("campaign", "watchdog", "budget", "executors")


def field_section(path: str) -> str:
    """The section of campaign field ``path``: its table (``watchdog`` for
    ``watchdog.action``), ``campaign`` for a top-level key."""
    table = path.rpartition(".")[0]
    return table if table in SECTIONS else "campaign"


def label_names(path: str) -> tuple[str, str]:
    """The two names field ``path`` can be labelled with: its dotted path
    (``watchdog.action``) and, where the section's title names its table, its key
    (``action``); the same name twice for a top-level key or an option."""
    return path, path.rpartition(".")[2]


#: ``device`` and ``devices`` are one setting (``engine.define.devices.check_device_pair``:
#: a file may set only one): the form unsets the other when one is set.
DEVICE_PAIR = {"device": "devices", "devices": "device"}


#: The form's one field that is no campaign key: ``max_parallel``, written into every
#: selected executor that declares the option (:meth:`fugue_tui.app.widgets.campaign_form.CampaignForm._max_parallel`), shown
#: after this key.
_MAX_PARALLEL_AFTER = "retries"


def campaign_fields() -> tuple[Field, ...]:
    """The campaign's fields, generated from the campaign keys declared as form fields
    (``engine.define.campaign_schema``: kind, choices, help and hint), in declaration
    order within each section (:data:`SECTIONS`), with ``max_parallel`` after ``retries``."""
    from engine.define.campaign_schema import KEYS, form_hint

    out = []
    for key in KEYS.values():
        if key.form is None:
            continue
        out.append(Field(key.name, key.form.kind, key.form.choices or key.choices,
                         help=key.form.help or key.doc, hint=form_hint(key)))
        if key.name == _MAX_PARALLEL_AFTER:
            out.append(Field("max_parallel", "text",
                             help="most jobs at once, a number or auto (estimated from this "
                                  "machine's profiles), for executors that run jobs "
                                  "concurrently (sets [options.<executor>] max_parallel)",
                             hint="e.g. 4 or auto (unset: all jobs)"))
    # grouped by section (stable: declaration order within each), one title each
    return tuple(sorted(out, key=lambda f: SECTIONS.index(f.section)))


def option_hint(declared: OptionField) -> str:
    """The placeholder of an executor option's field: its default first (``default fifo ·
    fifo|sha|asha``), or ``unset ·`` and what unset means, so that the dim text cannot be
    taken for a value."""
    from engine.define.executor_options import hint

    head = f"default {declared.default_text}" if declared.default is not None else "unset"
    rest = [("|".join(declared.choices) if declared.choices else ""),
            (f">= {declared.minimum:g}" if declared.minimum is not None else "")]
    text = " · ".join(p for p in (head, *rest) if p)
    return text if declared.default is not None or any(rest) else f"{head} · {hint(declared)}"


#: What Textual's ``Input`` accepts as it is typed (its ``type``).
InputType = Literal["integer", "number", "text"]


def input_type(types: tuple[type, ...]) -> InputType:
    """Textual's ``Input.type`` for a value of ``types``: ``integer`` and ``number`` refuse
    other keys as they are typed (a space typed into grace_period was taken); ``text`` where
    a word is also allowed (max_parallel's auto, a comma list of an axis)."""
    if set(types) == {int}:
        return "integer"
    if set(types) <= {int, float}:
        return "number"
    return "text"


def field_input_type(kind: str) -> InputType:
    """The ``Input.type`` of a campaign field of ``kind`` (:attr:`Field.kind`)."""
    if kind == "int":
        return "integer"
    return "number" if kind == "float" else "text"


def fit_hint(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells at a word or separator, with an ellipsis (a hint cut
    mid-list read as a value: "fp32, tf32, amp-fp16, amp-bf16,")."""
    if width <= 0 or len(text) <= width:
        return text
    cut = text[: max(1, width - 1)]
    for stop in (" · ", " (", ", ", " "):
        at = cut.rfind(stop)
        if at >= width // 3:
            cut = cut[:at]
            break
    return cut.rstrip(" ,·(") + "…"


def option_inputs(executor: str) -> list[tuple[str, str, str]]:
    """The option fields the form shows under a registered executor, generated from its
    declared options: ``(option, widget id, hint)`` in declaration order, the hint being
    the option's choices, bound and default, then its help."""
    from engine.define.executor_options import hint
    from engine.registry import EXECUTORS

    return [(option, f"opt-{executor}-{option}", hint(declared))
            for option, declared in EXECUTORS.get(executor).option_fields.items()]


def get_path(doc: PlanDoc, path: str) -> Any:
    """The value at dotted ``path`` of ``doc`` (``watchdog.action``), None when unset."""
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def set_path(doc: PlanDoc, path: str, value: Any) -> None:
    """Set dotted ``path`` of ``doc`` to ``value``, creating its tables; None removes it."""
    *parents, last = path.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    if value is None:
        doc.pop(last, None)
    else:
        doc[last] = value


def checked_value(spec: Field, text: str) -> tuple[Any] | str | None:
    """``text`` of a ``k_sweep``, ``devices`` or ``[budget]`` field as the campaign file's
    value, in a 1-tuple; a one-line error (the same words as ``--k-sweep`` and the campaign
    file's ``devices`` and ``[budget]`` checks); None for the other fields. The k_sweep rules that depend on the
    selection (increasing, >= 1, ensembles only) are the preview's, as for a file."""
    from engine.errors import ConfigError

    if spec.kind == "devices":
        from engine.define.devices import parse_devices

        try:
            names = parse_devices(text, "settings")
        except ConfigError as exc:
            return str(exc)
        return (names[0] if len(names) == 1 else list(names),)
    if spec.kind == "ints":
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            return ([int(p) for p in parts],)
        except ValueError:
            return (f"{spec.path}: expected comma-separated integers such as 1,2,4,8, "
                    f"got {text!r}")
    if not spec.path.startswith("budget."):
        return None
    from engine.profile.budget import parse_cores, parse_size

    key = spec.path.split(".", 1)[1]
    where = f"budget: key '{key}'"
    try:
        if spec.kind == "size":
            parse_size(text, where)
            try:  # a bare number is MiB: written as a number, as in a campaign file
                number = float(text)
                return (int(number) if number.is_integer() else number,)
            except ValueError:
                return (text,)
        return (parse_cores(text, where),)
    except ConfigError as exc:
        return str(exc)


def set_setting(doc: PlanDoc, spec: Field, text: str) -> str:
    """Write the text typed into campaign field ``spec`` into ``doc`` (blank: unset);
    returns why it was not written, one line (``""``: it was). Not for ``max_parallel``
    (:func:`set_max_parallel`)."""
    text = text.strip()
    if not text:
        set_path(doc, spec.path, None)
        return ""
    if spec.kind == "list":  # checked by the preview (parse_campaign), like a file's
        names = [t.strip() for t in text.split(",") if t.strip()]
        set_path(doc, spec.path, names[0] if len(names) == 1 else names)
        return ""
    checked = checked_value(spec, text)
    if isinstance(checked, str):
        return checked
    if checked is not None:
        set_path(doc, spec.path, checked[0])
        if spec.path in DEVICE_PAIR:
            set_path(doc, DEVICE_PAIR[spec.path], None)
        return ""
    try:
        value: Any = {"int": int, "float": float}.get(spec.kind, str)(text)
    except ValueError:
        return f"{spec.path}: not a number: {text!r}"
    set_path(doc, spec.path, value)
    return ""


def set_max_parallel(doc: PlanDoc, text: str) -> tuple[str, list[str]]:
    """The campaign-wide max_parallel typed as ``text`` (a number, ``auto`` or blank),
    written into every registered executor that declares the option (it is an executor
    option in the campaign file). Returns why it was not written (``""``: it was) and the
    executors it was written for."""
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
        return f"max_parallel: {exc}", []
    written = [name for name in EXECUTORS.names()
               if "max_parallel" in EXECUTORS.get(name).option_fields]
    for name in written:
        set_path(doc, f"options.{name}.max_parallel", value)
    return "", written


def set_option(doc: PlanDoc, executor: str, option: str, text: str) -> str:
    """Write executor option ``option`` of ``executor`` typed as ``text`` into ``doc``
    (blank: unset; an executor left without options loses its table); returns why it was
    not written, naming ``options.<executor>.<option>`` (``""``: it was)."""
    from engine.registry import EXECUTORS

    key = f"options.{executor}.{option}"
    try:
        declared = EXECUTORS.get(executor).option_fields[option]
        value = parse_option(text, declared.types, axis=declared.axis)
    except ValueError as exc:
        return f"{key}: {exc}"
    set_path(doc, key, value)
    if not doc.get("options", {}).get(executor):
        doc.get("options", {}).pop(executor, None)
    return ""


def shown_value(doc: PlanDoc, spec: Field) -> str | None:
    """What campaign field ``spec`` shows for plan ``doc``: an input's text (a list as
    ``"a, b"``), or a select's choice (None: blank; the watchdog's action is never blank,
    unset it is the dashboard's ``flag``). ``max_parallel`` shows the executors' common
    value, blank when they differ."""
    value = get_path(doc, spec.path)
    if spec.path == "max_parallel":
        values = {v.get("max_parallel") for v in (doc.get("options") or {}).values()
                  if isinstance(v, dict) and "max_parallel" in v}
        value = values.pop() if len(values) == 1 else None
    if spec.kind == "select":
        if isinstance(value, bool):  # save_models = true in a file: the "true" choice
            value = str(value).lower()
        if value in spec.choices:
            return str(value)
        return DEFAULT_WATCHDOG_ACTION if spec.path == "watchdog.action" else None
    if spec.kind in ("list", "ints", "devices") and isinstance(value, list):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


def plan_executors(doc: PlanDoc) -> list[str]:
    """The executors plan ``doc`` selects: its list, one name, or unset the campaign's
    declared default (the baseline executor)."""
    from engine.define.campaign_schema import default as campaign_default

    executors = doc.get("executors") or campaign_default("executors")
    return [executors] if isinstance(executors, str) else list(executors)
