"""Executor options, declared once: each executor's ``[options.<executor>]`` table is a
dataclass whose fields carry their default, type, choices, lower bound and help
(:func:`option`). Campaign validation (:func:`check_table`), ``fugue-tui run --help``
(:func:`help_lines`), the dashboard's option fields and the options table of
``docs/executors.md`` (:func:`markdown_table`) are all generated from those fields, so
adding an option is one field in ``engine/executors/__init__.py``.

A plugin may still declare its options as dicts (``ExecutorSpec(options={"workers":
(int,)}, option_help={...}, choices={...}, minimum={...}, axes=(...))``):
:func:`fields_from_dicts` reads them into the same :class:`OptionField` records.

Cell keys hash the user's literal options table, never these defaults
(``docs/measurement.md``, "Cell keys"): a default declared here never enters a key — except
through ``legacy``: an option added after cells were first keyed declares the behaviour
before it existed, and :func:`key_options` keeps it out of keys while it resolves to that
behaviour and hashes its resolved value otherwise.

Torch-free.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.define import tomlfile
from engine.errors import ConfigError, nearest

_META = "fugue_option"


class _NoLegacy:
    """The ``legacy`` of an option that existed when keys were first pinned."""

    def __repr__(self) -> str:
        return "NO_LEGACY"


NO_LEGACY: Any = _NoLegacy()


def option(default: Any = None, *, help: str = "", choices: tuple[str, ...] = (),
           minimum: float | None = None, axis: bool = False,
           check: Callable[[Any], Any] | None = None, legacy: Any = NO_LEGACY,
           workloads: tuple[str, ...] = ()) -> Any:
    """A field of an executor's options dataclass.

    Args:
        default: the value the executor uses when the table leaves the option out (None:
            the executor decides, e.g. ``max_parallel`` = all jobs; say so in ``help``).
        help: one line for ``run --help``, the dashboard and the docs (choices, bound and
            default are added there from the other arguments: do not repeat them).
        choices: allowed values of a string option (a list value must hold only these).
        minimum: smallest allowed value of a numeric option (a string value of an option
            that also allows strings, such as ``max_parallel = "auto"``, is left to
            ``check``).
        axis: the option expands into a matrix axis (``engine.define.axes``): a list value
            runs one cell per element.
        check: a further torch-free check of the value; raises ``ValueError`` with a reason.
        legacy: for an option that changes what runs, added after cells were keyed: the
            value that behaves as the code did before it existed. Cell keys leave the
            option out while its resolved value (the table's, else ``default``) is the
            legacy one, and hash the resolved value otherwise (:func:`key_options`).
        workloads: the workload types (``hpo``, ...) whose cells the option changes; empty:
            all. In other cells a ``legacy``-declared option is left out of the key and
            never expands into cells (rule 1: as ``scheduler`` outside hpo).
    """
    meta = {"help": help, "choices": tuple(choices), "minimum": minimum, "axis": axis,
            "check": check, "legacy": legacy, "workloads": tuple(workloads)}
    return field(default=default, metadata={_META: meta})


@dataclass(frozen=True)
class OptionField:
    """One executor option as every consumer sees it (typed or dict-declared)."""

    name: str
    types: tuple[type, ...]
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    axis: bool = False
    check: Callable[[Any], Any] | None = None
    #: The value that behaves as before the option existed (:func:`option`), or NO_LEGACY.
    legacy: Any = NO_LEGACY
    #: Workload types whose cells the option changes (:func:`option`); empty: all.
    workloads: tuple[str, ...] = ()

    def applies(self, workload: str | None) -> bool:
        """The option changes cells of ``workload`` (None: any workload)."""
        return not self.workloads or workload is None or workload in self.workloads

    @property
    def type_text(self) -> str:
        """``int``, ``str or list``: the types as ``run --help`` names them."""
        return " or ".join(t.__name__ for t in self.types)

    @property
    def default_text(self) -> str:
        """The default as a campaign file writes it (``true``, ``fifo``); "" for None."""
        if self.default is None:
            return ""
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)

    @property
    def constraint(self) -> str:
        """Choices, bound and default in a few words (``auto|on|off; default auto``)."""
        parts = []
        if self.choices:
            parts.append("|".join(self.choices))
        if self.minimum is not None:
            parts.append(f">= {self.minimum:g}")
        if self.default is not None:
            parts.append(f"default {self.default_text}")
        return "; ".join(parts)


def _types(hint: Any) -> tuple[type, ...]:
    """``int | None`` → ``(int,)``; ``str | list[str]`` → ``(str, list)``."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    out = []
    for arg in typing.get_args(hint) if union else (hint,):
        if arg is type(None):
            continue
        out.append(typing.get_origin(arg) or arg)
    return tuple(out)


def fields_of(options: type) -> dict[str, OptionField]:
    """The options of a dataclass declared with :func:`option`, in declaration order."""
    hints = typing.get_type_hints(options)
    out = {}
    for f in dataclasses.fields(options):
        meta = dict(f.metadata.get(_META) or {})
        default = None if f.default is dataclasses.MISSING else f.default
        out[f.name] = OptionField(name=f.name, types=_types(hints[f.name]), default=default,
                                  help=meta.get("help", ""),
                                  choices=meta.get("choices", ()),
                                  minimum=meta.get("minimum"), axis=meta.get("axis", False),
                                  check=meta.get("check"),
                                  legacy=meta.get("legacy", NO_LEGACY),
                                  workloads=meta.get("workloads", ()))
    return out


def fields_from_dicts(options: dict[str, tuple[type, ...]], option_help: dict[str, str],
                      choices: dict[str, tuple[str, ...]], minimum: dict[str, float],
                      axes: tuple[str, ...]) -> dict[str, OptionField]:
    """The options of a plugin that declares them as dicts (the API before typed options)."""
    return {name: OptionField(name=name, types=tuple(kinds), help=option_help.get(name, ""),
                              choices=tuple(choices.get(name, ())),
                              minimum=minimum.get(name), axis=name in axes)
            for name, kinds in options.items()}


def key_options(fields: dict[str, OptionField], table: dict[str, Any],
                workload: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What of an ``[options.<executor>]`` table enters a cell key (``docs/measurement.md``,
    "Cell keys", rules 1-3): the literal table without the options that declare a
    ``legacy`` value (those are keyed by what they resolve to, never by the word written),
    and the resolved value of each such option that is not its legacy one — in a cell of
    ``workload`` only those the option applies to (:attr:`OptionField.workloads`).

    Returns ``(literal, resolved)``; ``resolved`` is empty while every option behaves as
    before it existed, so those cells keep the keys they always had.
    An option written out at its declared default is in neither (rule 4): it runs
    what leaving it out runs, so spelling it out keeps the key.
    """
    literal, resolved = {}, {}
    for key, value in table.items():
        f = fields.get(key)
        if f is not None and _is_default(f, value):
            continue  # spelled out, it runs what leaving it out runs: the same key
        if f is None or f.legacy is NO_LEGACY:
            literal[key] = value
    for name, f in fields.items():
        if f.legacy is NO_LEGACY or not f.applies(workload):
            continue
        value = table.get(name, f.default)
        if value != f.legacy:
            resolved[name] = value
    return literal, resolved


def _is_default(f: OptionField, value: Any) -> bool:
    """``value`` is the option's declared default, written out (``mps = "auto"``): of the
    same type too (``1`` is no default ``true``). An option without a default (None) never
    is: leaving it out and writing a value differ."""
    return (f.default is not None and type(value) is type(f.default)
            and value == f.default)


def from_table(options: type, table: dict[str, Any] | None) -> Any:
    """An instance of the options dataclass for a (validated) table: the declared defaults
    for what it leaves out. Keys the dataclass does not declare are ignored."""
    names = {f.name for f in dataclasses.fields(options)}
    return options(**{k: v for k, v in (table or {}).items() if k in names})


def check_table(fields: dict[str, OptionField], table: dict[str, Any], where: str) -> None:
    """Validate an ``[options.<executor>]`` table: known keys and their types, then one
    value unless the option is an axis, the choices, the lower bound and the option's own
    check.

    Raises:
        ConfigError: one line, ``"<where>: key '<key>' ..."``.
    """
    tomlfile.check_keys(table, {name: f.types for name, f in fields.items()}, where)
    for key, value in table.items():
        spec = fields[key]
        values = value if isinstance(value, list) else [value]
        # A list is one value of a list-valued option (mp's devices), else an axis's cells.
        listed = list in spec.types and not spec.axis
        if isinstance(value, list) and not spec.axis and not listed:
            raise ConfigError(f"{where}: key '{key}' takes one value, got a list")
        if isinstance(value, list) and not value:
            raise ConfigError(f"{where}: key '{key}' is an empty list")
        for v in ([] if listed else values):
            if spec.choices and v not in spec.choices:
                raise ConfigError(f"{where}: key '{key}' must be one of "
                                  f"{', '.join(spec.choices)}, got {v!r}"
                                  f"{nearest(str(v), spec.choices)}")
            low = spec.minimum
            # A word the option's type allows (max_parallel's "auto") is its check's to judge.
            word = isinstance(v, str) and str in spec.types
            if low is not None and not word and not (isinstance(v, (int, float)) and v >= low):
                raise ConfigError(f"{where}: key '{key}' must be a number >= {low:g}, got {v!r}")
        if spec.check is not None:
            try:
                spec.check(value)
            except ValueError as exc:
                raise ConfigError(f"{where}: key '{key}': {exc}") from None


def help_lines(fields: dict[str, OptionField], indent: str = "      ") -> list[str]:
    """``run --help``'s lines for one executor: ``key (types[; constraint]): help``."""
    if not fields:
        return [f"{indent}(no options)"]
    out = []
    for f in fields.values():
        kind = f.type_text + (f"; {f.constraint}" if f.constraint else "")
        out.append(f"{indent}{f.name} ({kind}){': ' + f.help if f.help else ''}")
    return out


def hint(f: OptionField) -> str:
    """The dashboard's placeholder of an option field: its constraint, then its help."""
    return "  ".join(p for p in (f.constraint, f.help) if p)


def markdown_table(executors: list[tuple[str, dict[str, OptionField]]]) -> str:
    """The options table of ``docs/executors.md``: one row per executor option."""
    rows = ["| executor | option | type | choices | minimum | default | axis | meaning |",
            "|---|---|---|---|---|---|---|---|"]
    for name, fields in executors:
        for f in fields.values():
            cells = [f"`{name}`", f"`{f.name}`", f.type_text,
                     ", ".join(f"`{c}`" for c in f.choices),
                     "" if f.minimum is None else f"{f.minimum:g}",
                     f"`{f.default_text}`" if f.default_text else "",
                     "yes" if f.axis else "", f.help.replace("|", "\\|")]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
