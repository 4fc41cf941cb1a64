"""A retry sent while its cell was still queued reaches the runner only once the cell runs
(the dashboard's key sends it; so does a command that races the cell's start): it is not
applied — applying it killed the cell's first attempt and recorded a pointless killed row
(found by a fresh user). A retry sent after the attempt started still is."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from engine.runner.board import Board
from engine.runner.commands import Commands
from engine.runner.concurrent import Lanes, _State
from engine.runner.placement import Slot


def _commands(emitted: list, commands: list, started: float, running: dict | None = None):
    """The commands of a campaign whose cell ``k1`` started at ``started``: one device, or
    several (``running``: the cells running in their lanes)."""
    cell = SimpleNamespace(key="k1", index=1, label="D_ens seq")
    board = Board(threading.RLock(), running=running or {}, started_wall={"k1": started})
    inbox = SimpleNamespace(poll=lambda: [commands.pop(0)] if commands else [])
    journal = SimpleNamespace(emit=lambda event: emitted.append((event.type, event.fields)))
    applied = Commands(inbox, journal, board, find=lambda ref: cell if ref == "k1" else None,
                       skip=None, lanes=running is not None)
    applied.queued = lambda *a: emitted.append(("queued_command", a))
    return applied, board, cell


def test_one_device_a_retry_sent_before_the_start_is_not_applied():
    emitted: list = []
    commands, _, cell = _commands(emitted, [{"cmd": "retry", "cell": "k1", "ts": 99.0}],
                                  started=100.0)
    assert commands.stop_for(cell) is None  # the running attempt goes on
    assert emitted == [("control", {"cmd": "retry", "cell": "k1", "applied": False,
                                    "reason": "the cell had not started when the retry was "
                                              "sent (it runs now)"})]
    # the line keeps the key order the runner has always written (not the table's)
    assert list(emitted[0][1]) == ["cmd", "cell", "applied", "reason"]


def test_one_device_a_retry_sent_after_the_start_stops_for_the_retry():
    emitted: list = []
    commands, _, cell = _commands(emitted, [{"cmd": "retry", "cell": "k1", "ts": 101.0}],
                                  started=100.0)
    assert commands.stop_for(cell) == ("retry", "stopped for a retry by control command")
    assert emitted[0][1]["applied"] is True


def test_a_kill_sent_before_the_start_still_stops_the_cell():
    """kill and skip name the cell whatever its state: the user wants it stopped."""
    emitted: list = []
    commands, _, cell = _commands(emitted, [{"cmd": "kill", "cell": "k1", "ts": 99.0}],
                                  started=100.0)
    assert commands.stop_for(cell) == ("stop", "killed by control command")


def test_several_devices_the_same_rule():
    emitted: list = []
    commands, board, cell = _commands(emitted, [], started=100.0,
                                      running={"k1": Slot(0, {"uuid": "GPU-0"})})
    state = _State(Lanes([], {}, board, commands, run_cell=None))
    state._command({"cmd": "retry", "cell": "k1", "ts": 99.0})
    assert board.stops == {} and emitted[-1][1]["applied"] is False
    state._command({"cmd": "retry", "cell": "k1", "ts": 100.5})
    assert board.stops == {"k1": ("retry", "stopped for a retry by control command")}
