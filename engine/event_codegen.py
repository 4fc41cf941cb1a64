"""The source of :mod:`engine.event_types`, generated from the event table
(:data:`engine.events.EVENTS`, :data:`engine.events.FIELD_TYPES`): one class per declared
(source, type). Checked in rather than built at run time so that mypy sees the classes and
their typed fields; ``tests/unit/engine/test_event_types.py`` fails while the file and the table
differ. Torch-free.

    python -m engine.event_codegen > engine/event_types.py
"""

from __future__ import annotations

from engine.event_base import BASES, CELL, MONITOR, RUNNER
from engine.event_table import EVENTS, EventType, field_type


def types_module() -> str:
    """The source of :mod:`engine.event_types`: one class per event type of :data:`EVENTS`,
    its fields as typed properties (:data:`FIELD_TYPES`) and a keyword constructor (the
    declared fields required, the optional ones :data:`ABSENT` by default) that writes
    them in the table's order (:attr:`EventType.written`).

    Raises:
        KeyError: a field without a type; ValueError: a field whose name an event already
            uses (``type``, ``get``, ...).
    """
    lines = [
        '"""The typed events: one class per event type of the table (engine.events.EVENTS).',
        "",
        "GENERATED from engine/events.py (EVENTS, FIELD_TYPES); do not edit. After changing",
        "the table, run:  python -m engine.event_codegen > engine/event_types.py",
        "(tests/unit/engine/test_event_types.py fails while this file and the table differ).",
        "",
        "Each class reads its declared fields as typed properties (None when a document",
        "lacks one: engine.event_base) and builds an event to write from keyword arguments",
        "(the envelope and the writer's common fields are added when it is written).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, ClassVar",
        "",
        # one name per line, sorted: the form the lint's import sorting keeps
        "from engine.event_base import (",
        *[f"    {name}," for name in ("ABSENT", "CELL", "MONITOR", "RUNNER", "CellEvent",
                                       "Event", "MonitorEvent", "RunnerEvent", "_Absent",
                                       "draft")],
        ")",
        "",
        "__all__ = [",
    ]
    names: list[tuple[EventType, str]] = []
    for t in EVENTS:
        names.append((t, t.source.capitalize() + "".join(
            part.capitalize() for part in t.type.split("_"))))
    lines += [f'    "{name}",' for _, name in names] + ['    "CLASSES",', "]"]
    base = {RUNNER: "RunnerEvent", CELL: "CellEvent", MONITOR: "MonitorEvent"}
    for t, name in names:
        own = t.written  # the order of the JSON line's keys
        for field in own:
            if field in dir(BASES[t.source]) or not field.isidentifier():
                raise ValueError(f"{t.source} event {t.type!r}: field {field!r} cannot be "
                                 "a property of an event")
        lines += ["", "", f"class {name}({base[t.source]}):",
                  f'    """{t.doc or t.type}"""', "",
                  "    __slots__ = ()",
                  f'    TYPE: ClassVar[str] = "{t.type}"', ""]
        # keyword-only, in the written order (a field without a default may follow one
        # with: keyword-only parameters allow it)
        params = [f"{f}: {field_type(t.source, t.type, f)}" if f in t.fields
                  else f"{f}: {field_type(t.source, t.type, f)} | _Absent = ABSENT"
                  for f in own]
        if params:
            lines.append("    def __init__(self, *, " + ", ".join(params) + ") -> None:")
            args = ", ".join(f'"{f}": {f}' for f in own)
            lines.append(f'        super().__init__(draft("{t.type}", {{{args}}}))')
        else:
            lines.append("    def __init__(self) -> None:")
            lines.append(f'        super().__init__(draft("{t.type}", {{}}))')
        for field in own:
            annotation = field_type(t.source, t.type, field)
            if "None" not in annotation.split(" | "):
                annotation += " | None"
            lines += ["", "    @property", f"    def {field}(self) -> {annotation}:",
                      f'        return dict.get(self, "{field}")']
    lines += ["", "", "#: The class of each declared (source, type).",
              "CLASSES: dict[tuple[str, str], type[Event]] = {"]
    const = {RUNNER: "RUNNER", CELL: "CELL", MONITOR: "MONITOR"}
    lines += [f'    ({const[t.source]}, "{t.type}"): {name},' for t, name in names]
    lines += ["}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(types_module(), end="")
