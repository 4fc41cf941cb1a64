"""A retry sent while its cell was still queued reaches the runner only once the cell runs
(the dashboard's key sends it; so does a command that races the cell's start): it is not
applied — applying it killed the cell's first attempt and recorded a pointless killed row
(found by a fresh user). A retry sent after the attempt started still is."""

from __future__ import annotations

import threading
from collections import deque
from types import SimpleNamespace

from engine.runner.concurrent import _State
from engine.runner.placement import Slot
from engine.runner.supervisor import Runner


def _runner(emitted: list, commands: list, started: float, running: dict | None = None):
    cell = SimpleNamespace(key="k1", index=1, label="D_ens seq")
    ns = SimpleNamespace(
        _lock=threading.RLock(), queue=deque(), _stops={}, slots=[],
        _running=running or {}, _started_wall={"k1": started},
        campaign=SimpleNamespace(one_cell_per_host=False),
        find=lambda ref: cell if ref == "k1" else None,
        inbox=SimpleNamespace(poll=lambda: [commands.pop(0)] if commands else []),
        _emit=lambda type, **f: emitted.append((type, f)),
        _queued_command=lambda *a: emitted.append(("queued_command", a)))
    ns.stale_retry = lambda command, c: Runner.stale_retry(ns, command, c)
    return ns, cell


def test_one_device_a_retry_sent_before_the_start_is_not_applied():
    emitted: list = []
    ns, cell = _runner(emitted, [{"cmd": "retry", "cell": "k1", "ts": 99.0}], started=100.0)
    assert Runner._handle_commands(ns, cell) is None  # the running attempt goes on
    assert emitted == [("control", {"cmd": "retry", "cell": "k1", "applied": False,
                                    "reason": "the cell had not started when the retry was "
                                              "sent (it runs now)"})]


def test_one_device_a_retry_sent_after_the_start_stops_for_the_retry():
    emitted: list = []
    ns, cell = _runner(emitted, [{"cmd": "retry", "cell": "k1", "ts": 101.0}], started=100.0)
    assert Runner._handle_commands(ns, cell) == ("retry",
                                                 "stopped for a retry by control command")
    assert emitted[0][1]["applied"] is True


def test_a_kill_sent_before_the_start_still_stops_the_cell():
    """kill and skip name the cell whatever its state: the user wants it stopped."""
    emitted: list = []
    ns, cell = _runner(emitted, [{"cmd": "kill", "cell": "k1", "ts": 99.0}], started=100.0)
    assert Runner._handle_commands(ns, cell) == ("stop", "killed by control command")


def test_several_devices_the_same_rule():
    emitted: list = []
    ns, cell = _runner(emitted, [], started=100.0, running={"k1": Slot(0, {"uuid": "GPU-0"})})
    state = _State(ns)
    state._command({"cmd": "retry", "cell": "k1", "ts": 99.0})
    assert ns._stops == {} and emitted[-1][1]["applied"] is False
    state._command({"cmd": "retry", "cell": "k1", "ts": 100.5})
    assert ns._stops == {"k1": ("retry", "stopped for a retry by control command")}
