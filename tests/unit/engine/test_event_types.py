"""The typed events (issue 40): one class per declared (source, type), generated from the
event table into the checked-in ``engine/event_types.py``; every event read or written is
one, typed by its class and its fields, and is still the exact JSON document it was (a
read-only dict of the same keys in the same order), so readers by key keep working."""

from __future__ import annotations

import copy
import glob
import json
import pickle
from pathlib import Path

import pytest

from engine import event_codegen, event_types, events
from engine.event_base import ABSENT
from engine.event_types import (
    CellDone,
    CellJobProgress,
    CellStarted,
    MonitorSample,
    RunnerCellStarted,
    RunnerDone,
    RunnerKilled,
)
from engine.events import (
    CELL,
    COMMON,
    ENVELOPE,
    EVENTS,
    MONITOR,
    RUNNER,
    CellEvent,
    Event,
    EventTail,
    EventType,
    EventWriter,
    RunnerEvent,
    event_to_json,
    parse_event,
    read_events,
)

ROOT = Path(__file__).resolve().parents[3]
RECORDED = sorted(glob.glob(str(ROOT / "tests/fixtures/**/*.jsonl"), recursive=True))


def test_the_generated_module_is_the_tables():
    """Regenerate and compare: a type, field or field type changed in engine/events.py
    without running ``python -m engine.events --types > engine/event_types.py`` fails."""
    assert (ROOT / "engine" / "event_types.py").read_text() == event_codegen.types_module()


def test_the_generator_follows_the_table():
    EVENTS.add(EventType("paused", RUNNER, ("cell", "attempt"), ("reason",)))
    try:
        source = event_codegen.types_module()
    finally:
        EVENTS.remove(RUNNER, "paused")
    assert "class RunnerPaused(RunnerEvent):" in source
    assert ("    def __init__(self, *, cell: str, attempt: int, reason: str | _Absent = ABSENT)"
            " -> None:") in source
    assert '(RUNNER, "paused"): RunnerPaused,' in source
    assert source != event_codegen.types_module()


def test_a_field_without_a_type_is_refused_by_the_generator():
    EVENTS.add(EventType("paused", RUNNER, ("cell", "whyy")))
    try:
        with pytest.raises(KeyError, match="'whyy' has no type"):
            event_codegen.types_module()
    finally:
        EVENTS.remove(RUNNER, "paused")


def test_one_class_per_declared_type_with_its_fields_typed():
    assert set(event_types.CLASSES) == {(t.source, t.type) for t in EVENTS}
    for (source, kind), cls in event_types.CLASSES.items():
        declared = EVENTS.get(kind, source)
        assert cls.TYPE == kind and cls.source == source
        for name in declared.fields + declared.optional:
            assert isinstance(getattr(cls, name), property), (kind, name)
    hints = RunnerKilled.exit_code.fget.__annotations__["return"]
    assert hints == "int | None"
    assert CellJobProgress.epoch.fget.__annotations__["return"] == "int | None"


def _full_doc(event_type: EventType) -> dict:
    """A document of every field the type declares, in an order unlike the table's."""
    doc = {"v": 1, "ts": 1700000000.25, "type": event_type.type}
    doc.update({name: f"{name}-value" for name in COMMON[event_type.source]})
    for i, name in enumerate(reversed(event_type.fields + event_type.optional)):
        doc[name] = [i, {"x": None}] if i % 3 == 0 else i / 7 if i % 3 == 1 else str(i)
    return doc


@pytest.mark.parametrize("event_type", list(EVENTS), ids=lambda t: f"{t.source}-{t.type}")
def test_every_declared_event_round_trips_byte_for_byte(event_type):
    doc = _full_doc(event_type)
    line = json.dumps(doc, separators=(",", ":"))
    event = parse_event(json.loads(line))
    assert type(event) is event_types.CLASSES[(event_type.source, event_type.type)]
    assert event_to_json(event) == line
    assert event_to_json(event.to_dict()) == line and type(event.to_dict()) is dict
    assert list(event) == list(doc) and event == doc
    for name in event_type.fields + event_type.optional:
        assert getattr(event, name) == doc[name]
    assert (event.type, event.v, event.ts) == (event_type.type, 1, 1700000000.25)


def test_recorded_streams_round_trip_byte_for_byte():
    assert RECORDED
    lines = 0
    for path in RECORDED:
        for line in Path(path).read_text().splitlines():
            if not line.strip():
                continue
            event = parse_event(json.loads(line))
            assert event_to_json(event) == line, path
            lines += 1
    assert lines > 100


def test_the_mapping_interface_is_the_documents():
    doc = {"v": 1, "ts": 5.0, "type": "done", "campaign": "c", "cell": "k", "attempt": 2,
           "exit_code": 0, "error": ""}
    event = parse_event(doc)
    assert isinstance(event, RunnerDone) and isinstance(event, RunnerEvent)
    assert event["type"] == "done" and event.get("exit_code") == 0 and "error" in event
    assert event.get("reason") is None and "reason" not in event and len(event) == 8
    assert list(event.keys()) == list(doc) and dict(event) == doc and {**event} == doc
    assert isinstance(event, dict) and json.loads(json.dumps(event)) == doc
    assert (event.campaign, event.cell, event.attempt, event.exit_code) == ("c", "k", 2, 0)
    assert event.fields == {k: v for k, v in doc.items() if k not in ENVELOPE}
    for change in (lambda e: e.__setitem__("x", 1), lambda e: e.update(x=1),
                   lambda e: e.pop("type"), lambda e: e.setdefault("x", 1),
                   lambda e: e.clear(), lambda e: e.__delitem__("type")):
        with pytest.raises(TypeError, match="read-only"):
            change(event)
    assert event == doc  # untouched
    assert pickle.loads(pickle.dumps(event)) == event
    assert type(copy.deepcopy(event)) is RunnerDone and copy.deepcopy(event) == doc
    assert doc["type"] == "done" and parse_event(event) is event  # parsing copies a dict


def test_absent_fields_read_none_and_unknown_types_are_their_sources_base():
    partial = parse_event({"type": "cell_started", "campaign": "c", "cell": "k"})
    assert isinstance(partial, RunnerCellStarted)
    assert (partial.attempt, partial.pid, partial.ts, partial.v) == (None, None, None, None)
    newer = parse_event({"v": 2, "type": "paused", "campaign": "c", "cell": "k", "why": 1})
    assert type(newer) is RunnerEvent and newer.type == "paused" and newer["why"] == 1
    cell = parse_event({"type": "checkpoint", "cell": "k", "attempt": 1})
    assert type(cell) is CellEvent and cell.cell == "k" and cell.attempt == 1
    assert type(parse_event({"type": "sample", "cell": "k", "attempt": 1})) is MonitorSample
    odd = parse_event({"type": ["not", "a", "name"], "cell": "k"})
    assert type(odd) is CellEvent and odd.type == ""
    # an undeclared field of a newer writer is kept, in its place
    extra = parse_event({"type": "done", "cell": "k", "attempt": 1, "error": "",
                         "group_written": True, "new_field": [1]})
    assert isinstance(extra, CellDone) and list(extra)[-1] == "new_field"


def test_the_writer_writes_typed_events_as_emit_does(tmp_path):
    plain = EventWriter(tmp_path / "a.jsonl", cell="k", attempt=1)
    typed = EventWriter(tmp_path / "b.jsonl", cell="k", attempt=1)
    one = plain.emit("started", pid=7, exp_id="E", executor="seq", jobs=["j0"])
    two = typed.write(CellStarted(pid=7, exp_id="E", executor="seq", jobs=["j0"]))
    assert isinstance(one, CellStarted) and isinstance(two, CellStarted)
    assert list(one) == list(two) and {**one, "ts": 0} == {**two, "ts": 0}
    assert two.cell == "k" and two.attempt == 1 and two.v == 1 and two.ts is not None
    # optional fields: left out unless given (None is a value and is written)
    done = typed.write(CellDone(error="", group_written=True))
    assert "output_error" not in done
    assert CellDone(error="x", group_written=False, output_error=True)["output_error"] is True
    killed = RunnerKilled(cell="k", attempt=1, reason="r", exit_code=None)
    assert list(killed) == ["type", "cell", "attempt", "reason", "exit_code"]
    assert killed.exit_code is None and "predecessor" not in killed
    plain.close()
    typed.close()
    a, b = (tmp_path / "a.jsonl").read_text(), (tmp_path / "b.jsonl").read_text()
    assert a.split('"type"')[1] == b.split('"type"')[1].split("\n")[0] + "\n"
    read = read_events(tmp_path / "b.jsonl")
    assert [type(e) for e in read] == [CellStarted, CellDone]
    assert [type(e) for e in EventTail(tmp_path / "b.jsonl").read()] == [CellStarted, CellDone]
    assert ABSENT is copy.deepcopy(ABSENT) and repr(ABSENT) == "ABSENT"


def test_the_builders_return_the_typed_classes():
    assert isinstance(events.job_progress(job_id="j", epoch=1), CellJobProgress)
    built = events.build("done", RUNNER, cell="k", attempt=1, exit_code=0, error="")
    assert isinstance(built, RunnerDone) and built.v is None
    assert isinstance(events.build("sample", MONITOR, t=1.0), MonitorSample)
    assert isinstance(events.build("done", CELL, error="", group_written=True), CellDone)
    assert Event.of({"type": "x"}).type == "x"


def test_the_last_line_of_a_type_is_found_by_its_offset(tmp_path):
    path = tmp_path / "runner.jsonl"
    assert events.last_line_of(path, "campaign_started") == 0  # no file
    writer = EventWriter(path, campaign="c")
    writer.emit("campaign_started", cells=1, run_dir="r", device="cpu", runner_pid=1,
                resume=False)
    writer.emit("warning", message='"type":"campaign_started" quoted is not the type')
    second = path.stat().st_size
    writer.emit("campaign_started", cells=1, run_dir="r", device="cpu", runner_pid=2,
                resume=True)
    writer.emit("campaign_done", ok=True, exit_code=0, failed=0)
    writer.close()
    assert events.last_line_of(path, "campaign_started") == second
    assert events.last_line_of(path, "queued") == 0
