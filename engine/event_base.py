"""Events in memory: the base classes of the typed events that :mod:`engine.event_types`
generates from the event table (:data:`engine.events.EVENTS`), and the names every event
shares (its sources, its envelope, each source's common fields). Torch-free.

An event object is the document it was read from or will be written as, typed: its class
says its source and type (``isinstance(event, RunnerDone)`` instead of comparing type
names), its declared fields are typed properties (``event.exit_code``), and it is a
read-only ``dict`` of exactly the keys the JSON line has, in their order. A dict because
every reader before the typed classes (the front ends, replay, tools) takes an event as
the JSON object it is: ``event["type"]``, ``event.get(...)``, ``json.dumps(event)``,
``isinstance(event, dict)`` keep working unchanged, while typed code reads attributes.

Reading is tolerant: files written by older or newer versions (and hand-made events in
tests) may lack a declared field or carry an undeclared one, so every field property reads
``None`` for an absent key and the document keeps what it had. An event of a type this
version does not declare is an instance of its source's base class
(:class:`RunnerEvent`, :class:`CellEvent`, :class:`MonitorEvent`).

This module parses and writes no JSON: :mod:`engine.events` does (the protocol module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NoReturn, Self

SCHEMA_VERSION = 1

#: Where an event comes from, and the fields every event of that source carries (besides
#: the envelope ``v``, ``ts``, ``type``). The runner's events name the campaign; a cell's
#: and its monitor's name the cell and the attempt.
RUNNER, CELL, MONITOR = "runner", "cell", "monitor"
SOURCES = (RUNNER, CELL, MONITOR)
ENVELOPE = ("v", "ts", "type")
COMMON = {RUNNER: ("campaign",), CELL: ("cell", "attempt"), MONITOR: ("cell", "attempt")}


class _Absent:
    """The value of an optional field left out of an event (``None`` is a value: written)."""

    _instance: ClassVar[_Absent | None] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


#: Default of the optional fields of the generated constructors: not written.
ABSENT = _Absent()


def draft(type_name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The document of an event not yet written: its type, then its fields in the given
    order, those :data:`ABSENT` left out (the writer adds the envelope and its common
    fields: :meth:`engine.events.EventWriter.write`)."""
    return {"type": type_name, **{k: v for k, v in fields.items() if v is not ABSENT}}


def _read_only(self: Event, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only (an event as it was written); "
                    "copy it with dict(event) to change it")


class Event(dict[str, Any]):
    """One event (see the module): a read-only ``dict`` of its JSON document, typed.

    ``source``: runner, cell or monitor (the class's). :attr:`type`, :attr:`v`,
    :attr:`ts`: the envelope (``v`` and ``ts`` are None in an event not yet written).
    """

    __slots__ = ()
    source: ClassVar[str] = ""

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Self:
        """This class over a copy of ``doc`` (no check: the reader is tolerant)."""
        event = dict.__new__(cls)
        dict.update(event, doc)
        return event

    # -- the envelope --------------------------------------------------------------------
    @property
    def type(self) -> str:
        """The event's type name (``""`` when a document has none)."""
        value = dict.get(self, "type")
        return value if isinstance(value, str) else ""

    @property
    def v(self) -> int | None:
        """The schema version it was written with."""
        return dict.get(self, "v")

    @property
    def ts(self) -> float | None:
        """When it was written (``time.time()``)."""
        return dict.get(self, "ts")

    @property
    def fields(self) -> dict[str, Any]:
        """Everything but the envelope, in order (what ``emit(type, **fields)`` takes)."""
        return {k: v for k, v in self.items() if k not in ENVELOPE}

    def send(self, emit: Callable[..., Any]) -> Any:
        """Write it through ``emit(type, **fields)`` (a cell's ``ctx.emit``, an
        :class:`engine.events.EventWriter`'s ``emit``); returns what ``emit`` returns."""
        return emit(self.type, **self.fields)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: a plain dict, keys in the order they were written."""
        return dict(self)

    # -- read-only -----------------------------------------------------------------------
    __setitem__ = __delitem__ = _read_only
    pop = popitem = clear = update = setdefault = _read_only  # type: ignore[assignment]
    __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickle, copy: through the class, not setitem
        return (type(self).of, (dict(self),))

    def __copy__(self) -> Self:
        return self  # read-only: a copy is the same event

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"


class RunnerEvent(Event):
    """An event of the runner (``runner.jsonl``)."""

    __slots__ = ()
    source: ClassVar[str] = RUNNER

    @property
    def campaign(self) -> str | None:
        """The campaign's id (every runner event's)."""
        return dict.get(self, "campaign")


class _AttemptEvent(Event):
    __slots__ = ()

    @property
    def cell(self) -> str | None:
        """The cell's key."""
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        """The attempt's number (1 = the first)."""
        return dict.get(self, "attempt")


class CellEvent(_AttemptEvent):
    """An event of a cell (its attempt's ``events.jsonl``)."""

    __slots__ = ()
    source: ClassVar[str] = CELL


class MonitorEvent(_AttemptEvent):
    """An event of a cell's monitor (its attempt's ``events.jsonl``)."""

    __slots__ = ()
    source: ClassVar[str] = MONITOR


#: The base class of each source (also the class of a type this version does not know).
BASES: dict[str, type[Event]] = {RUNNER: RunnerEvent, CELL: CellEvent, MONITOR: MonitorEvent}
