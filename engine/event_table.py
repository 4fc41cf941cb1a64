"""The event table: every event type declared once, with its source, its fields, their
types and its roles (:data:`EVENTS`, :data:`FIELD_TYPES`), and the sets derived from it
(:class:`EventTable`). What the events' protocol module (:mod:`engine.events`) reads and
writes, what :mod:`engine.event_codegen` generates the typed classes from and what
``docs/events.md`` is generated from. Torch-free; imports only the classes' base module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.event_base import (
    CELL,
    COMMON,
    ENVELOPE,
    MONITOR,
    RUNNER,
    SCHEMA_VERSION,
    SOURCES,
)

#: Roles an event type may have (see :class:`EventType`).
ROLES = {
    "lifecycle": "fsync'ed at once; a cell that cannot write it fails",
    "required": "a cell that cannot write it fails (not fsync'ed)",
    "progress": "a cell event the watchdog counts as progress",
    "active": "a runner event after which the cell is running",
    "end": "a runner event that ends the cell's attempt",
    "final": "a runner event after which the cell has finished (unless retried)",
}


@dataclass(frozen=True)
class EventType:
    """One event type of one source.

    ``fields``: written in every event of the type; ``optional``: written when they apply.
    ``roles``: among :data:`ROLES`. ``cell_state``: for runner events about a cell, the
    cell's state after the event (``engine.observe.state``). ``order``: the order the
    fields are written in, when it is not ``fields`` then ``optional`` (every field once;
    the generated constructors write that order, so an event's JSON line keeps the key
    order its writers have always used).

    Raises:
        ValueError: an unknown source or role; an ``order`` that is not every field once.
    """

    type: str
    source: str
    fields: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    roles: frozenset[str] = frozenset()
    cell_state: str | None = None
    doc: str = ""
    order: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"event {self.type!r}: unknown source {self.source!r}")
        unknown = set(self.roles) - set(ROLES)
        if unknown:
            raise ValueError(f"event {self.type!r}: unknown roles {sorted(unknown)}")
        if self.order and sorted(self.order) != sorted(self.fields + self.optional):
            raise ValueError(f"event {self.type!r}: order {list(self.order)} must name each "
                             f"of its fields once: {list(self.fields + self.optional)}")

    @property
    def written(self) -> tuple[str, ...]:
        """The type's own fields in the order they are written (:attr:`order`, else
        ``fields`` then ``optional``); an optional field left out keeps the others' order."""
        return self.order or self.fields + self.optional

    @property
    def declared(self) -> frozenset[str]:
        """Every field an event of this type may carry."""
        return frozenset(ENVELOPE + COMMON[self.source] + self.fields + self.optional)


def _t(type: str, source: str, fields: str = "", optional: str = "", roles: str = "",
       state: str | None = None, doc: str = "", order: str = "") -> EventType:
    return EventType(type, source, tuple(fields.split()), tuple(optional.split()),
                     frozenset(roles.split()), state, doc, tuple(order.split()))


class EventTable:
    """The event types, keyed by ``(source, type)``, and the sets derived from them
    (recomputed when a type is added or removed)."""

    def __init__(self, types: Iterable[EventType]):
        self._types: dict[tuple[str, str], EventType] = {}
        self._derived: dict[str, frozenset[str]] = {}
        for event_type in types:
            self.add(event_type)

    # -- the table ------------------------------------------------------------------------
    def add(self, event_type: EventType) -> None:
        key = (event_type.source, event_type.type)
        if key in self._types:
            raise ValueError(f"event {event_type.type!r} of the {event_type.source} "
                             "is declared twice")
        self._types[key] = event_type
        self._derived.clear()

    def remove(self, source: str, type: str) -> EventType:
        self._derived.clear()
        return self._types.pop((source, type))

    def get(self, type: str | None, source: str) -> EventType | None:
        return self._types.get((source, type or ""))

    def __iter__(self) -> Iterator[EventType]:
        return iter(self._types.values())

    def of(self, source: str) -> list[EventType]:
        return [t for t in self if t.source == source]

    def _set(self, name: str, compute) -> frozenset[str]:
        value = self._derived.get(name)
        if value is None:
            value = self._derived[name] = frozenset(compute())
        return value

    def _with(self, role: str, source: str | None = None) -> Iterator[EventType]:
        return (t for t in self if role in t.roles and source in (None, t.source))

    # -- derived sets ---------------------------------------------------------------------
    @property
    def lifecycle(self) -> frozenset[str]:
        """Types written with an fsync (of any source; a cell fails when one is lost)."""
        return self._set("lifecycle", lambda: (t.type for t in self._with("lifecycle")))

    @property
    def required(self) -> frozenset[str]:
        """Cell types whose loss must fail the cell: lifecycle events and the summary."""
        return self._set("required", lambda: (
            t.type for t in self if t.roles & {"lifecycle", "required"}))

    @property
    def progress(self) -> frozenset[str]:
        """Cell types the watchdog counts as progress (never monitor samples)."""
        return self._set("progress", lambda: (t.type for t in self._with("progress", CELL)))

    @property
    def end(self) -> frozenset[str]:
        """Runner types that end a cell's attempt."""
        return self._set("end", lambda: (t.type for t in self._with("end", RUNNER)))

    @property
    def cell_states(self) -> frozenset[str]:
        """Every state a cell can be in."""
        return self._set("cell_states", lambda: (
            t.cell_state for t in self.of(RUNNER) if t.cell_state))

    @property
    def active(self) -> frozenset[str]:
        """Cell states of a cell running now (running, suspect, hung)."""
        return self._set("active", lambda: (t.cell_state for t in self._with("active", RUNNER)
                                            if t.cell_state))

    @property
    def ended(self) -> frozenset[str]:
        """Cell states after which an attempt is over (done, failed, killed)."""
        return self._set("ended", lambda: (t.cell_state for t in self._with("end", RUNNER)
                                           if t.cell_state))

    @property
    def finished(self) -> frozenset[str]:
        """Cell states of a cell that has finished for now: its attempt ended, or it was
        skipped (counted as done by the front ends' headers)."""
        return self._set("finished", lambda: (
            t.cell_state for t in self._with("final", RUNNER) if t.cell_state))

    # -- checks and docs ------------------------------------------------------------------
    def validate(self, event: Mapping[str, Any]) -> list[str]:
        """What is wrong with ``event`` by the table (empty when nothing): an unknown type
        for its source, a missing field, a field the type does not declare."""
        source = source_of(event)
        kind = event.get("type")
        declared = self.get(kind, source)
        if declared is None:
            return [f"unknown {source} event type {kind!r}"]
        problems = [f"{source} event {kind!r}: missing field {name!r}"
                    for name in ENVELOPE + COMMON[source] + declared.fields if name not in event]
        problems += [f"{source} event {kind!r}: undeclared field {name!r}"
                     for name in event if name not in declared.declared]
        return problems

    def markdown(self) -> str:
        """The table as the Markdown of ``docs/events.md``."""
        lines = [
            "# Events", "",
            "<!-- Generated from engine/events.py (EVENTS): edit the table there, then run",
            "     python -m engine.events > docs/events.md -->", "",
            "One JSON object per line. Every event carries "
            + ", ".join(f"`{f}`" for f in ENVELOPE)
            + f" (schema version {SCHEMA_VERSION}); the runner's also `campaign` "
            "(`runner.jsonl`), a cell's and its monitor's also `cell` and `attempt` (the "
            "attempt's `events.jsonl`).", "",
            "In Python each event type is a class of `engine/event_types.py`, generated "
            "from this table (`python -m engine.event_codegen > engine/event_types.py`): "
            "`Runner`, `Cell` or `Monitor` followed by the type in CamelCase "
            "(`RunnerCellStarted`, `CellJobProgress`), its fields typed properties. "
            "`engine.events.parse_event` reads a line's object as one, `EventTail` and "
            "`read_events` yield them, `EventWriter.write` writes one; each is also the "
            "read-only dict of its line.", "",
            "An event's fields are written in the order listed, its fields then the optional "
            "ones that apply, unless its row gives another order.", "",
            "Roles: " + "; ".join(f"**{name}**: {doc}" for name, doc in ROLES.items()) + ".",
            "",
            "A cell that ended well is `done` in the events and in the campaign state "
            "(`engine.observe.state`), `ok` in its CSV rows (`status`) and in the front "
            "ends' counts; a job's `status` in `job_done` is the rows' word (ok, failed).",
            ""]
        for source in SOURCES:
            lines += [f"## {source.capitalize()} events", "",
                      "| type | fields | optional | roles | cell state | what |",
                      "|---|---|---|---|---|---|"]
            for t in self.of(source):
                lines.append("| " + " | ".join([
                    f"`{t.type}`", ", ".join(t.fields), ", ".join(t.optional),
                    ", ".join(sorted(t.roles)), t.cell_state or "", t.doc + (
                        f"; written in the order {', '.join(t.order)}" if t.order else "")
                ]) + " |")
            lines.append("")
        return "\n".join(lines)


#: Every event type, by source. Adding an event type is adding a line here.
EVENTS = EventTable([
    # -- the runner (runner.jsonl) --------------------------------------------------------
    _t("campaign_started", RUNNER, "cells run_dir device runner_pid resume",
       "reuse_any guard_pid devices",
       doc="a runner session starts (reuse_any: resume reuses other campaigns' ok rows; "
           "guard_pid: the process that cleans up if the runner dies; devices: a multi-device "
           "campaign's devices, each as the placement column names it)"),
    _t("zygote", RUNNER, "pid", "warm_s imports_s threads python_threads cuda_initialized error",
       doc="the runner's pre-warmed cell parent is ready (warm_s: its start and imports, "
           "imports_s: the imports; threads, python_threads, cuda_initialized: as it reported "
           "them, checked again before every fork: 1, 1, false), or cannot start cells (error: "
           "why; they then start as fresh interpreters)"),
    _t("queued", RUNNER, "cell index label", "manual_retry", "lifecycle", "queued",
       doc="a cell waits for its turn (again, after a manual retry)"),
    _t("skipped", RUNNER, "cell index label reason",
       "from_campaign from_attempt from_timestamp", "lifecycle final", "skipped",
       doc="a cell will not run (already ok, cannot run here, skipped by control); an ok "
           "row's campaign, attempt and timestamp when resume skipped it for one"),
    _t("cell_started", RUNNER, "cell index label attempt events log_path pid",
       "start start_s device node", "active", "running",
       doc="an attempt's process started (start: zygote, forked from the runner's pre-warmed "
           "parent, or spawn, a fresh interpreter; start_s: seconds from the runner's "
           "decision to run the attempt until its process ran; device: in a multi-device "
           "campaign, the device it was placed on, as the placement column says; node: on a "
           "Ray cluster, the node it runs on, as the node column says, and pid is its pid "
           "there)"),
    _t("suspect", RUNNER, "cell attempt seen", "", "lifecycle active", "suspect",
       doc="no progress for suspect_after checks"),
    _t("hung", RUNNER, "cell attempt seen action", "", "lifecycle active", "hung",
       doc="no progress for hung_after checks"),
    _t("resumed", RUNNER, "cell attempt", "", "active", "running",
       doc="a hung cell progresses again"),
    _t("leftovers_killed", RUNNER, "cell attempt pids",
       doc="processes an attempt left outside its session were killed"),
    _t("done", RUNNER, "cell attempt exit_code error", "", "lifecycle end final", "done",
       doc="an attempt ended ok"),
    _t("failed", RUNNER, "cell attempt exit_code error", "", "lifecycle end final", "failed",
       doc="an attempt failed"),
    _t("killed", RUNNER, "cell attempt reason", "exit_code predecessor node_lost",
       "lifecycle end final", "killed",
       doc="an attempt was stopped (control, watchdog, Ctrl-C, or an earlier runner's; "
           "node_lost: its cluster node was lost while it ran)"),
    _t("retried", RUNNER, "cell attempt manual", "retry retries node_lost", "lifecycle",
       "queued",
       doc="a failed, hung or killed cell runs again (node_lost: on another cluster node, "
           "without using a retry of the campaign's budget; retry of retries: its node "
           "losses so far of those allowed)"),
    # (the attempt's cell, attempt or folder first: how the runner and its guard have
    # always written it)
    _t("cleanup", RUNNER, "messages", "cell attempt attempt_dir predecessor guard runner_pid",
       doc="what a cell recorded for cleanup was stopped (guard: by the guard of runner "
           "runner_pid, which had died)",
       order="cell attempt attempt_dir messages predecessor guard runner_pid"),
    _t("control", RUNNER, "cmd applied", "cell reason",
       doc="a control command was applied or ignored", order="cmd cell applied reason"),
    _t("warning", RUNNER, "message", "cell attempt",
       doc="something the user must know that stops nothing: a results file the runner "
           "appended to was repaired or upgraded (the file, what was done, the backup)"),
    _t("campaign_interrupted", RUNNER, doc="Ctrl-C or SIGTERM stopped the campaign"),
    _t("campaign_aborted", RUNNER, doc="a control command aborted the campaign"),
    _t("campaign_done", RUNNER, "ok exit_code failed", "error",
       doc="the runner session ends (with the campaign's exit code)"),
    # -- a cell (events.jsonl) ------------------------------------------------------------
    _t("started", CELL, "pid exp_id executor jobs", "", "lifecycle progress",
       doc="the cell process is up; its job ids"),
    _t("phase", CELL, "phase", "seconds window arrivals", "progress",
       doc="imports, data_load, setup, group_start, group_end (window: the group window's "
           "[start, end] on time.perf_counter), teardown (arrivals: a stream cell's "
           "group_start, issue 51: each job's arrival, seconds after the window opens, in "
           "the order of its started event's jobs; the window opens just after this event, "
           "once the device is synchronised and the monitor's mark sample written, so the "
           "event's ts is the stream's time 0 to within milliseconds, what the dashboard's "
           "timeline places the arrivals from)"),
    _t("executor", CELL, "name", "temp_dir tag address",
       doc="the executor's runtime (ray)"),
    _t("warning", CELL, "message",
       doc="a warning the executor raised (ray tune), or a results file the cell appended "
           "to was repaired or upgraded (the file, what was done, the backup)"),
    _t("job_started", CELL, "job_id", "pid worker_pid", "progress",
       doc="a job starts (worker_pid: the process training it, under mp and ray; pid in recordings of older mp cells)"),
    _t("job_progress", CELL, "job_id epoch epochs step steps samples loss elapsed",
       "val_loss val_acc epoch_end train_sps val_metric", "progress",
       doc="rate-limited at the source; epoch_end with the epoch's validation (val_metric: "
           "what val_acc holds, accuracy or r2; absent in older recordings)"),
    _t("waiting", CELL, "job_id until_s", "", "progress",
       doc="a stream cell waits for its next arrival (issue 51): job job_id arrives at "
           "until_s seconds after the group window opened; repeated every heartbeat while "
           "it waits, so the watchdog sees progress"),
    _t("job_done", CELL, "job_id status error total_time_s samples final_val_acc",
       "pid early_stopped stop_reason", "progress",
       doc="a job ended (status ok or failed)"),
    _t("summary", CELL, "group_id status error T_group total_samples throughput_group "
       "setup_s data_load_s warnings jobs", "", "progress required",
       doc="the group's rows are written"),
    _t("done", CELL, "error group_written", "output_error", "lifecycle progress",
       doc="the cell ends ok"),
    _t("failed", CELL, "error group_written", "output_error", "lifecycle progress",
       doc="the cell ends failed (with whether its failed row was written)"),
    _t("killed", CELL, "reason", "", "lifecycle",
       doc="written by the next runner for an attempt an earlier runner left"),
    # -- a cell's monitor (events.jsonl) --------------------------------------------------
    _t("sample", MONITOR, "t",
       "time gpu_util_pct mem_used_mib power_w energy_mj sm_clock_mhz temp_c cpu_pct "
       "rss_mib host_mem_available_mib",
       doc="one monitor sample (GPU fields null without a GPU)"),
])


#: The type of each field, as its annotation in the generated classes
#: (:mod:`engine.event_types`): what writers put there (``None`` included where they write
#: null). A field added to the table needs its type here (the generator says so).
FIELD_TYPES: dict[str, str] = {
    # common
    "campaign": "str", "cell": "str", "attempt": "int", "until_s": "float",
    # the runner's
    "cells": "int", "run_dir": "str", "device": "str", "runner_pid": "int", "resume": "bool",
    "reuse_any": "bool", "guard_pid": "int | None", "devices": "list[str]",
    "pid": "int | None", "warm_s": "float", "imports_s": "float", "threads": "int",
    "python_threads": "int", "cuda_initialized": "bool", "error": "str | None",
    "index": "int", "label": "str", "manual_retry": "bool", "reason": "str",
    # from_attempt: the reused row's attempt as its CSV holds it (text, "1")
    "from_campaign": "str", "from_attempt": "str", "from_timestamp": "str",
    "events": "str", "log_path": "str", "start": "str", "start_s": "float",
    # pids: the pids killed, or the one line saying why they could not be stopped
    "node": "str | None", "seen": "str", "action": "str", "pids": "list[int | str]",
    "exit_code": "int | None", "predecessor": "bool", "node_lost": "bool",
    "manual": "bool", "retry": "int", "retries": "int", "messages": "list[str]",
    "attempt_dir": "str", "guard": "bool", "cmd": "str", "applied": "bool",
    "message": "str", "ok": "bool", "failed": "int",
    # a cell's
    "exp_id": "str", "executor": "str", "jobs": "list[str]", "phase": "str",
    "seconds": "float | None", "window": "list[float]", "arrivals": "list[float]",
    "name": "str",
    "temp_dir": "str | None", "tag": "str | None", "address": "str | None",
    "job_id": "str", "worker_pid": "int | None", "epoch": "int", "epochs": "int",
    "step": "int", "steps": "int", "samples": "int", "loss": "float | None",
    "elapsed": "float", "val_loss": "float | None", "val_acc": "float | None",
    "epoch_end": "bool", "train_sps": "float | None", "val_metric": "str | None",
    "status": "str", "total_time_s": "float | None", "final_val_acc": "float | None",
    "early_stopped": "bool", "stop_reason": "str | None", "group_id": "str",
    "T_group": "float", "total_samples": "int", "throughput_group": "float | None",
    "setup_s": "float", "data_load_s": "float | None", "warnings": "list[str]",
    "group_written": "bool", "output_error": "bool",
    # a monitor's (GPU fields null without a GPU)
    "t": "float", "time": "float", "gpu_util_pct": "float | None",
    "mem_used_mib": "float | None", "power_w": "float | None", "energy_mj": "float | None",
    "sm_clock_mhz": "float | None", "temp_c": "float | None", "cpu_pct": "float | None",
    "rss_mib": "float | None", "host_mem_available_mib": "float | None",
}
#: Fields whose type differs between event types: ``(source, type, field)``.
FIELD_TYPES_BY_EVENT: dict[tuple[str, str, str], str] = {
    (CELL, "summary", "jobs"): "list[dict[str, Any]]",  # each job's status and history
    (CELL, "summary", "error"): "str",
    (CELL, "job_done", "error"): "str",
    (RUNNER, "campaign_done", "failed"): "int",
}


def field_type(source: str, type: str, name: str) -> str:
    """The annotation of field ``name`` of events ``type`` of ``source``.

    Raises:
        KeyError: a field without a declared type (add it to :data:`FIELD_TYPES`).
    """
    found = FIELD_TYPES_BY_EVENT.get((source, type, name)) or FIELD_TYPES.get(name)
    if found is None:
        raise KeyError(f"{source} event {type!r}: field {name!r} has no type in "
                       "engine.events.FIELD_TYPES")
    return found


def is_runner_event(event: Mapping[str, Any]) -> bool:
    """Whether ``event`` comes from the runner (``runner.jsonl``) rather than a cell or its
    monitor: the runner's events name the campaign."""
    return COMMON[RUNNER][0] in event


def source_of(event: Mapping[str, Any]) -> str:
    """The source of ``event``: runner, monitor (the types only a monitor writes) or cell."""
    if is_runner_event(event):
        return RUNNER
    kind = event.get("type")
    if EVENTS.get(kind, MONITOR) is not None and EVENTS.get(kind, CELL) is None:
        return MONITOR
    return CELL
