"""The wait between arrivals of seq and mp (issue 51): a ``waiting`` event first and every heartbeat,
and no wait at all for a job that has already arrived."""

from __future__ import annotations

import time

import engine.executors.arrivals as seq
from engine.events import EVENTS


def test_waiting_sends_heartbeats_until_the_arrival(monkeypatch):
    monkeypatch.setattr(seq, "HEARTBEAT_S", 0.05)
    sent: list[tuple[str, dict]] = []
    t0 = time.perf_counter()
    seq.wait_until(t0 + 0.3, "a0001_x", 1.25, lambda type, **f: sent.append((type, f)))
    assert time.perf_counter() - t0 >= 0.3
    assert len(sent) >= 3 and {t for t, _ in sent} == {"waiting"}
    assert sent[0][1] == {"job_id": "a0001_x", "until_s": 1.25}
    assert "waiting" in EVENTS.progress  # the watchdog counts it


def test_an_arrived_job_is_not_waited_for():
    sent: list[str] = []
    seq.wait_until(time.perf_counter() - 1.0, "a", 0.0, lambda type, **f: sent.append(type))
    assert sent == []
