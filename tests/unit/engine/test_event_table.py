"""The event table (``engine.events.EVENTS``): the sets derived from it are the ones the code
has always branched on, real streams agree with it, the docs are generated from it, and
adding an event type is a one-place change (a dummy type added to the table is picked up by
the derived sets, the reducer, the live view, the watchdog's progress check, the cell's
must-land rule, validation, the builders and the docs)."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine import events
from engine.events import CELL, EVENTS, MONITOR, RUNNER, EventType, EventWriter, build
from engine.observe.state import CampaignState
from engine.runner.attempt import Attempt

ROOT = Path(__file__).resolve().parents[3]


def test_derived_sets_are_the_historical_ones():
    assert EVENTS.lifecycle == {"queued", "started", "done", "failed", "killed", "skipped",
                                "retried", "suspect", "hung"}
    assert EVENTS.required == EVENTS.lifecycle | {"summary"}
    # waiting: a stream cell between arrivals (issue 51) is alive, not hung
    assert EVENTS.progress == {"started", "phase", "job_started", "job_progress", "job_done",
                               "summary", "done", "failed", "waiting"}
    assert EVENTS.end == {"done", "failed", "killed"}
    assert EVENTS.active == {"running", "suspect", "hung"}
    assert EVENTS.ended == {"done", "failed", "killed"}
    assert EVENTS.finished == {"done", "failed", "killed", "skipped"}
    assert EVENTS.cell_states == {"queued", "running", "suspect", "hung", "done", "failed",
                                  "killed", "skipped"}


def test_recorded_streams_agree_with_the_table():
    files = glob.glob(str(ROOT / "tests/fixtures/dashboard/runs/**/*.jsonl"), recursive=True)
    assert files
    problems = {p for f in files for e in events.read_events(f) for p in EVENTS.validate(e)}
    assert problems == set()


def test_sources_and_the_runner_predicate():
    assert events.is_runner_event({"type": "done", "campaign": "c", "cell": "k"})
    assert not events.is_runner_event({"type": "done", "cell": "k", "attempt": 1})
    assert events.source_of({"type": "sample", "cell": "k", "attempt": 1}) == MONITOR
    assert events.source_of({"type": "job_done", "cell": "k", "attempt": 1}) == CELL
    assert events.source_of({"type": "killed", "campaign": "c"}) == RUNNER


def test_docs_are_generated_from_the_table():
    assert (ROOT / "docs" / "events.md").read_text() == EVENTS.markdown() + "\n"


def test_job_done_builder_keeps_the_wire_keys_in_order():
    result = SimpleNamespace(job=SimpleNamespace(job_id="j0"), status="ok", error="",
                             total_time_s=1.5, samples=96, final_val_acc=0.9)
    event = events.job_done(result, pid=7)
    assert event.type == "job_done" and list(event.fields.items()) == [
        ("job_id", "j0"), ("status", "ok"), ("error", ""), ("total_time_s", 1.5),
        ("samples", 96), ("final_val_acc", 0.9), ("pid", 7)]
    sent = []
    event.send(lambda type_, **fields: sent.append((type_, fields)))  # any emit(type, **f)
    assert sent == [("job_done", event.fields)]
    with pytest.raises(ValueError, match="undeclared fields \\['pdi'\\]"):
        events.job_done(result, pdi=7)
    with pytest.raises(ValueError, match="unknown cell event type"):
        build("job_dne", CELL, job_id="j0")


def test_builders_write_the_same_line_as_a_plain_emit(tmp_path):
    plain = EventWriter(tmp_path / "a.jsonl", cell="k", attempt=1)
    built = EventWriter(tmp_path / "b.jsonl", cell="k", attempt=1)
    fields = dict(job_id="j0", epoch=1, epochs=2, step=3, steps=3, samples=96, loss=0.5,
                  elapsed=1.0)
    one = plain.emit("job_progress", **fields)
    two = events.job_progress(**fields).send(built.emit)
    assert list(one) == list(two) and {**one, "ts": 0} == {**two, "ts": 0}


# -- adding an event type: one place ----------------------------------------------------

PAUSED = EventType("paused", RUNNER, ("cell", "attempt", "why"), roles=frozenset(
    {"lifecycle", "active"}), cell_state="paused", doc="a dummy: the runner paused a cell")
CHECKPOINT = EventType("checkpoint", CELL, ("job_id", "path"), ("bytes",),
                       frozenset({"progress"}), doc="a dummy: a job saved a checkpoint")


@pytest.fixture
def dummy_types():
    EVENTS.add(PAUSED)
    EVENTS.add(CHECKPOINT)
    try:
        yield
    finally:
        EVENTS.remove(RUNNER, "paused")
        EVENTS.remove(CELL, "checkpoint")


def _running_cell(state: CampaignState) -> None:
    for event in [
        {"type": "campaign_started", "campaign": "c", "device": "cpu", "ts": 1.0},
        {"type": "queued", "campaign": "c", "cell": "k", "index": 1, "label": "E seq", "ts": 1.0},
        {"type": "cell_started", "campaign": "c", "cell": "k", "index": 1, "label": "E seq",
         "attempt": 1, "ts": 2.0},
    ]:
        state.apply(event)


def test_a_new_event_type_is_picked_up_everywhere(dummy_types, tmp_path, monkeypatch):
    # the derived sets
    assert "paused" in EVENTS.lifecycle and "paused" in EVENTS.required
    assert "paused" in EVENTS.active and "paused" in EVENTS.cell_states
    assert "checkpoint" in EVENTS.progress and "checkpoint" not in EVENTS.lifecycle
    # validation and the builders
    good = {"v": 1, "ts": 3.0, "type": "checkpoint", "cell": "k", "attempt": 1,
            "job_id": "j0", "path": "/ckpt", "bytes": 10}
    assert EVENTS.validate(good) == []
    assert EVENTS.validate({**good, "path": None, "pth": 1}) == [
        "cell event 'checkpoint': undeclared field 'pth'"]
    assert build("checkpoint", CELL, job_id="j0", path="/ckpt").type == "checkpoint"
    with pytest.raises(ValueError):
        build("checkpoint", CELL, job_id="j0", size=1)
    # the docs
    doc = EVENTS.markdown()
    assert "| `paused` | cell, attempt, why |  | active, lifecycle | paused |" in doc
    assert "| `checkpoint` | job_id, path | bytes | progress |" in doc
    # the reducer: a runner event's cell state comes from the table
    state = CampaignState()
    _running_cell(state)
    state.apply({"type": "paused", "campaign": "c", "cell": "k", "attempt": 1, "why": "x",
                 "ts": 3.0})
    cell = state.cells["k"]
    assert cell.state == "paused" and cell.active and not cell.ended
    # the cell's writer syncs it, and a cell that cannot write it fails
    from engine.cell.output import CellEvents
    from engine.errors import OutputError

    writer = EventWriter(tmp_path / "runner.jsonl", campaign="c")
    synced = []
    monkeypatch.setattr(events.os, "fsync", synced.append)
    writer.emit("paused", cell="k", attempt=1, why="x")
    writer.emit("checkpoint", job_id="j0", path="/ckpt")
    assert len(synced) == 1
    cell_events = CellEvents(tmp_path / "events.jsonl", cell="k", attempt=1)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(EventWriter, "emit", disk_full)
    with pytest.raises(OutputError):
        cell_events.emit("paused", why="x")
    cell_events.emit("checkpoint", job_id="j0", path="/ckpt")  # progress may be dropped
    # the watchdog counts it as progress
    (tmp_path / "cell.jsonl").write_text(json.dumps({**good}) + "\n")
    seen = []
    fake = SimpleNamespace(failure=None, journal=SimpleNamespace(forward=seen.append))
    watchdog = SimpleNamespace(progress=lambda: seen.append("progress"),
                               sample=lambda event: None)
    Attempt.forward(fake, events.EventTail(tmp_path / "cell.jsonl"), watchdog)
    assert seen[0] == "progress" and seen[1]["type"] == "checkpoint"


def test_the_live_view_renders_a_new_active_state(dummy_types):
    from rich.console import Console

    from fugue_tui.live.view import LiveView

    view = LiveView(1, clock=lambda: 10.0)
    _running_cell(view.state)
    view.apply({"type": "paused", "campaign": "c", "cell": "k", "attempt": 1, "why": "x",
                "ts": 3.0})
    console = Console(width=100, record=True, color_system=None)
    console.print(view.render())
    assert "[1/1] E seq · attempt 1 · cell 0:08 · paused" in console.export_text()


def test_the_dummy_types_are_gone_after_the_fixture():
    assert EVENTS.get("paused", RUNNER) is None and "paused" not in EVENTS.lifecycle
    assert "checkpoint" not in EVENTS.progress
