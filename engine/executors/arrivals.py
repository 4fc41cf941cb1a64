"""Waiting for a stream's next arrival (issue 51), shared by the executors that serve
streams online (seq, mp, unified_model): sleep with a ``waiting`` heartbeat the watchdog
counts as progress."""

from __future__ import annotations

import time
from typing import Any

from engine.event_types import CellWaiting

#: Seconds between a waiting stream cell's ``waiting`` events (well inside the watchdog's
#: smallest sensible interval).
HEARTBEAT_S = 1.0


def wait_until(deadline: float, job_id: str, until_s: float, emit: Any) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``deadline`` (now when it has), sending
    a ``waiting`` event (``job_id`` arrives at ``until_s``) first and every
    :data:`HEARTBEAT_S` after."""
    while (left := deadline - time.perf_counter()) > 0:
        CellWaiting(job_id=job_id, until_s=until_s).send(emit)
        time.sleep(min(HEARTBEAT_S, left))


__all__ = ["HEARTBEAT_S", "wait_until"]
