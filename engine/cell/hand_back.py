"""The cell's hand-back phase (issue 50): after the group window closed (``group_end``)
and before teardown, the executor hands back its jobs' final weights — digested into each
job row's ``weights_sha256`` and, when ``save_models`` asks, written under the attempt
folder — in the process that holds them (:meth:`engine.executors.base.Executor.hand_back`).

Outside ``T_group`` by construction (the window's end was taken before). Its cost is
recorded (``digest_s``, ``save_s``, group) and a failure of it never fails the cell: the
measured rows stay valid, the digests of what was not handed back stay empty and
``save_status`` says ``failed: <one line>`` when a save was asked.
"""

from __future__ import annotations

import time
from typing import Any

from engine.errors import failure_line
from engine.event_types import CellPhase


def run_hand_back(executor: Any, jobs: list, results: list, ctx: Any, name: str,
                  emit: Any) -> None:
    """Ask ``executor`` (registered as ``name``) to hand back ``results``' weights; set each
    result's ``weights_sha256`` and the group's ``digest_s``, ``save_s``, ``save_status``
    in ``ctx.group``; send the ``hand_back`` phase event. Never raises for the hand-back's
    own failures."""
    from engine.models import hand_back as hb

    t0 = time.perf_counter()
    mode = getattr(ctx, "save_models", "false") or "false"
    backs: dict[str, hb.HandBack] = {}
    problem = None
    try:
        save = hb.save_selection(mode, results)
        backs = executor.hand_back(jobs, results, ctx, save, name)
    except Exception as exc:  # noqa: BLE001 - the measured rows matter more than the digest
        problem = failure_line(exc)
        print(f"warning: hand-back failed: {problem}", flush=True)
    hb.apply(backs, results)
    columns = hb.group_columns(backs, mode)
    if problem is not None and mode in ("true", "best"):
        columns["save_status"] = f"failed: {problem}"
    ctx.group.update(columns)
    CellPhase(phase="hand_back", seconds=time.perf_counter() - t0).send(emit)
