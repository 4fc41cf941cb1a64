"""The repeat rule of :mod:`engine.runner.commands` where the storm test's single lane does
not reach it (issue 44): several lanes (the stop kept on the board, then taken by the
attempt), a retry of a finished cell queued again, a kill after the cell ended killed,
and the order of different stops for one attempt (an abort is not undone by a kill)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from engine.runner.board import Board
from engine.runner.commands import ALREADY, RETRY_SETTLE_S, STOPS, Commands
from engine.runner.outcome import CellOutcome
from engine.runner.placement import Slot

CELL = SimpleNamespace(key="k1", index=1, label="D_ens seq")


def _commands(running: bool, batch: list | None = None):
    emitted: list = []
    board = Board(threading.RLock(), running={"k1": Slot(0, {"uuid": "GPU-0"})} if running
                  else {}, started_wall={"k1": time.time() - 60})
    inbox = SimpleNamespace(poll=lambda: batch.pop(0) if batch else [])
    journal = SimpleNamespace(emit=lambda event: emitted.append(dict(event.fields))
                              if event.type == "control" else None)
    commands = Commands(inbox, journal, board, find=lambda ref: CELL if ref == "k1" else None,
                        skip=None, lanes=True)
    return commands, board, emitted


def _retry(ts: float | None = None) -> dict:
    return {"cmd": "retry", "cell": "k1", "ts": time.time() if ts is None else ts}


def test_several_lanes_a_retry_applies_once_per_attempt():
    commands, board, emitted = _commands(running=True)
    commands.route(_retry())
    commands.route(_retry())  # kept for the attempt, not taken yet
    assert board.stops == {"k1": STOPS["retry"]}
    assert commands.stop_for(CELL) == STOPS["retry"]  # the attempt takes it
    commands.route(_retry())  # stopping; the next attempt has not started
    board.started_wall["k1"] = time.time()  # the attempt the retry started runs
    commands.route(_retry())
    assert board.stops == {}
    assert [e["applied"] for e in emitted] == [True, False, False, False]
    assert all(e["reason"].startswith(ALREADY) for e in emitted[1:]), emitted
    # once that attempt has run the settle time, a retry retries it
    commands.retried["k1"] -= RETRY_SETTLE_S + 1  # the clock moved on
    board.started_wall["k1"] -= RETRY_SETTLE_S + 0.5
    commands.route(_retry())
    assert emitted[-1]["applied"] is True and board.stops == {"k1": STOPS["retry"]}


def test_a_retry_sent_before_the_applied_one_is_a_repeat_even_late():
    commands, board, emitted = _commands(running=True)
    sent = time.time() - RETRY_SETTLE_S - 3
    commands.route(_retry())
    commands.stop_for(CELL)
    commands.retried["k1"] -= RETRY_SETTLE_S + 2  # the clock moved on: long since running
    board.started_wall["k1"] = commands.retried["k1"] + 0.5
    commands.route(_retry(ts=sent))  # raced the applied one in the inbox
    assert emitted[-1]["applied"] is False and emitted[-1]["reason"].startswith(ALREADY)


def test_a_finished_cell_queued_again_is_not_queued_twice():
    commands, board, emitted = _commands(running=False)
    commands.route(_retry())
    commands.route(_retry())
    assert list(board.queue) == [CELL]
    assert [e["applied"] for e in emitted] == [True, False]
    assert emitted[1]["reason"].startswith(ALREADY)


def test_kills_pressed_again_do_nothing_more():
    commands, board, emitted = _commands(running=True)
    board.attempts["k1"] = attempt = SimpleNamespace(cell=CELL)
    commands.route({"cmd": "kill", "cell": "k1"})
    commands.route({"cmd": "kill", "cell": "k1"})  # kept, not taken yet
    assert commands.stop_for(CELL) == STOPS["kill"]
    commands.route({"cmd": "kill", "cell": "k1"})  # taken: the same attempt is stopping
    commands.route({"cmd": "retry", "cell": "k1"})  # stopping for good: no retry
    board.running.clear()
    board.outcomes["k1"] = CellOutcome(CELL, "killed", 1, "killed by control command")
    commands.route({"cmd": "kill", "cell": "k1"})  # ended killed
    assert [e["applied"] for e in emitted] == [True, False, False, False, False]
    reasons = [e.get("reason", "") for e in emitted]
    assert reasons[3] == "the attempt is being stopped for good"
    assert all(reasons[i].startswith(ALREADY) for i in (1, 2, 4)), reasons
    # nothing kept that a later attempt of the cell would take
    assert board.stops == {} and board.attempts["k1"] is attempt
    commands.route({"cmd": "retry", "cell": "k1"})  # it ended: the retry queues it again
    assert list(board.queue) == [CELL] and emitted[-1]["applied"] is True


def test_one_lane_a_kill_in_the_batch_of_an_abort_does_not_undo_it():
    batch = [[{"cmd": "abort"}, {"cmd": "kill", "cell": "k1"}, {"cmd": "retry", "cell": "k1"}]]
    commands, _, emitted = _commands(running=True, batch=batch)
    commands.lanes = False
    assert commands.stop_for(CELL)[0] == "abort"
    assert [e["applied"] for e in emitted] == [True, False, False]


def test_one_lane_a_kill_outranks_a_retry_of_the_same_batch():
    batch = [[_retry(), _retry(), {"cmd": "kill", "cell": "k1"}, {"cmd": "skip", "cell": "k1"}]]
    commands, _, emitted = _commands(running=True, batch=batch)
    commands.lanes = False
    assert commands.stop_for(CELL) == STOPS["kill"]
    assert [e["applied"] for e in emitted] == [True, False, True, False]
    assert "k1" not in commands.retried  # the retry did not happen


def test_an_abort_naming_a_cell_is_not_applied():
    commands, board, emitted = _commands(running=True)
    assert commands.route({"cmd": "abort", "cell": "1"}) is None
    assert emitted == [{"cmd": "abort", "applied": False,
                        "reason": "abort takes no cell (it named '1')"}]
