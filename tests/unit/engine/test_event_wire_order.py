"""The event table says what is written (issue 40): the runner writes ``control``,
``cleanup``, ``skipped`` and ``leftovers_killed`` through the generated constructors, and
their JSON lines are byte for byte the ones the table's checked builder (``build``, the
path the runner used while the table disagreed with the wire) wrote for the same fields:
the same keys in the same order, ``skipped.from_attempt`` as the CSV's text, a
``leftovers_killed`` whose ``pids`` is the line saying why they could not be stopped."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import engine.events as events_mod
from engine.event_base import ABSENT, RUNNER
from engine.event_types import (
    RunnerCleanup,
    RunnerControl,
    RunnerLeftoversKilled,
    RunnerSkipped,
)
from engine.events import EVENTS, Event, EventType, EventWriter, build
from engine.runner.attempt import cleanup_event
from engine.runner.commands import Commands


@pytest.fixture
def line_of(tmp_path, monkeypatch):
    """The bytes a runner's writer (campaign ``c``) appends for an event, at a fixed time."""
    monkeypatch.setattr(events_mod.time, "time", lambda: 1700000000.125)
    count = iter(range(1000))

    def line(event: Event) -> bytes:
        path = tmp_path / f"runner-{next(count)}.jsonl"
        writer = EventWriter(path, campaign="c")
        try:
            writer.write(event)
        finally:
            writer.close()
        return path.read_bytes()

    return line


def _old_control(cmd: str, applied: bool, cell: str | None, reason: str | None) -> Event:
    """``Commands._answer`` before the table declared the order (the fields it wrote)."""
    fields: dict = {"cmd": cmd}
    if cell is not None:
        fields["cell"] = cell
    fields["applied"] = applied
    if reason is not None:
        fields["reason"] = reason
    return build("control", RUNNER, **fields)


@pytest.mark.parametrize("cell", [None, "k1"])
@pytest.mark.parametrize("reason", [None, "no such cell"])
@pytest.mark.parametrize("applied", [True, False])
def test_control_is_written_as_the_runner_always_wrote_it(line_of, cell, reason, applied):
    answered: list[Event] = []
    # only the journal is used to answer
    commands = Commands(inbox=None, journal=SimpleNamespace(emit=answered.append),
                        board=None, find=lambda key: None, skip=None, lanes=False)
    commands._answer("retry", applied, cell, reason)  # the runner's own code path
    new, = answered
    assert isinstance(new, RunnerControl)
    old = _old_control("retry", applied, cell, reason)
    assert line_of(new) == line_of(old)
    expected = ["cmd"] + (["cell"] if cell else []) + ["applied"] + (["reason"] if reason else [])
    assert list(new.fields) == expected


def test_cleanup_is_written_as_the_runner_and_its_guard_always_wrote_it(line_of):
    messages = ["processes: stopped 2", "ray: cleanup failed: OSError: gone"]
    # an attempt's (engine.runner.attempt, and a cluster attempt's final report)
    new = cleanup_event("k1", 2, messages)
    old = build("cleanup", RUNNER, cell="k1", attempt=2, messages=messages)
    assert line_of(new) == line_of(old)
    assert list(new.fields) == ["cell", "attempt", "messages"]
    # a predecessor's attempt folder (engine.runner.supervisor)
    new = RunnerCleanup(attempt_dir="/runs/c/cells/x/attempt-1", messages=messages,
                        predecessor=True)
    old = build("cleanup", RUNNER, attempt_dir="/runs/c/cells/x/attempt-1",
                messages=messages, predecessor=True)
    assert line_of(new) == line_of(old)
    # a cluster's local runtime (engine.runner.cluster)
    assert line_of(RunnerCleanup(messages=messages, predecessor=True)) == line_of(
        build("cleanup", RUNNER, messages=messages, predecessor=True))
    # the guard of a runner that died (engine.runner.guard writes it with emit)
    assert line_of(RunnerCleanup(messages=messages, guard=True, runner_pid=4242)) == line_of(
        build("cleanup", RUNNER, messages=messages, guard=True, runner_pid=4242))


def test_skipped_keeps_the_reused_rows_attempt_as_its_text(line_of):
    row = {"campaign_id": "older", "attempt": "1", "timestamp": "2026-12-01T10:00:00"}
    fields = {"cell": "k1", "index": 3, "label": "D_ens seq pass 1",
              "reason": "already ok in campaign 'older' (resume)"}
    new = RunnerSkipped(**fields, from_campaign=row["campaign_id"],
                        from_attempt=row["attempt"], from_timestamp=row["timestamp"])
    old = build("skipped", RUNNER, **fields, from_campaign=row["campaign_id"],
                from_attempt=row["attempt"], from_timestamp=row["timestamp"])
    assert line_of(new) == line_of(old)
    assert b'"from_attempt":"1"' in line_of(new)
    # a skip without a reused row leaves the three out
    assert line_of(RunnerSkipped(**fields)) == line_of(build("skipped", RUNNER, **fields))


@pytest.mark.parametrize("leftovers", [[4242, 4243], ["cannot stop session 99: EPERM"]],
                         ids=["pids", "error-line"])
def test_leftovers_killed_holds_the_pids_or_the_error_line(line_of, leftovers):
    new = RunnerLeftoversKilled(cell="k1", attempt=1, pids=list(leftovers))
    old = build("leftovers_killed", RUNNER, cell="k1", attempt=1, pids=list(leftovers))
    assert line_of(new) == line_of(old)
    assert new.pids == leftovers


def test_the_table_declares_each_types_written_order():
    assert EVENTS.get("control", RUNNER).written == ("cmd", "cell", "applied", "reason")
    assert EVENTS.get("cleanup", RUNNER).written[:4] == ("cell", "attempt", "attempt_dir",
                                                         "messages")
    # without an order: its fields, then the optional ones
    assert EVENTS.get("killed", RUNNER).written == ("cell", "attempt", "reason", "exit_code",
                                                   "predecessor", "node_lost")
    # every constructor writes the declared order, whatever order its arguments come in
    every = RunnerControl(reason="r", applied=False, cell="k", cmd="skip")
    assert list(every.fields) == ["cmd", "cell", "applied", "reason"]
    assert list(RunnerControl(cmd="abort", applied=True, cell=ABSENT).fields) == ["cmd",
                                                                                 "applied"]


def test_an_order_must_name_every_field_once():
    with pytest.raises(ValueError, match="must name each of its fields once"):
        EventType("paused", RUNNER, ("cell",), ("why",), order=("why",))
    with pytest.raises(ValueError, match="must name each of its fields once"):
        EventType("paused", RUNNER, ("cell",), ("why",), order=("why", "cell", "cell"))
    assert EventType("paused", RUNNER, ("cell",), ("why",),
                     order=("why", "cell")).written == ("why", "cell")
