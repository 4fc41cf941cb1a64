"""The processes that competed with a cell for the host's CPUs during its group window:
CPU seconds of every process outside the cell's process tree, read at the window's start
and end (``psutil``), and the busiest of them. Both reads happen outside the window (about
10-30 ms each for a few hundred processes), so the measurement does not enter ``T_group``.

It answers the question a load warning raises ("the machine was busy": with what?): the
row's ``competing_processes`` and the warning line name them, and the dashboard's campaign
timeline shows them beside the warned cell.
"""

from __future__ import annotations

import os
from typing import Any

import psutil

#: A process is named when it used at least this much of one core over the window, %.
MIN_PCT = 10.0


def _tree(root: int) -> set[int]:
    """``root`` and its descendants (Ray's raylet and workers, mp's workers: the cell's own)."""
    try:
        proc = psutil.Process(root)
        return {root, *(p.pid for p in proc.children(recursive=True))}
    except (psutil.Error, OSError):
        return {root}


def snapshot(root: int | None = None) -> dict[int, tuple[str, float, float]]:
    """``pid -> (name, user + system CPU seconds, create time)`` of every readable process
    outside ``root``'s tree (default: this process). Unreadable processes are left out."""
    own = _tree(root if root is not None else os.getpid())
    out: dict[int, tuple[str, float, float]] = {}
    for proc in psutil.process_iter(["pid", "name", "cpu_times", "create_time"]):
        info = proc.info
        times = info.get("cpu_times")
        if info["pid"] in own or times is None:
            continue
        out[info["pid"]] = (str(info.get("name") or "?"), times.user + times.system,
                            float(info.get("create_time") or 0.0))
    return out


def busiest(before: dict[int, tuple[str, float, float]], after: dict[int, tuple[str, float, float]],
            seconds: float, root: int | None = None, n: int = 3,
            min_pct: float = MIN_PCT) -> list[dict[str, Any]]:
    """The ``n`` processes outside ``root``'s tree (read again now: a worker the cell
    started during the window is its own) that used the most CPU between the two
    snapshots, as ``{"pid", "name", "cpu_pct"}`` (% of one core over ``seconds``), at least
    ``min_pct`` each, busiest first. A process started during the window counts from its
    start; one that ended during it is not seen (its CPU is lost to this measure)."""
    if seconds <= 0:
        return []
    own = _tree(root if root is not None else os.getpid())
    found = []
    for pid, (name, cpu, created) in after.items():
        if pid in own:
            continue
        then = before.get(pid)
        used = cpu - then[1] if then is not None and then[2] == created else cpu
        pct = 100.0 * used / seconds
        if pct >= min_pct:
            found.append({"pid": pid, "name": name, "cpu_pct": round(pct, 1)})
    return sorted(found, key=lambda p: -p["cpu_pct"])[:n]


def describe(competitors: list[dict[str, Any]]) -> str:
    """``python (pid 123) 95 %, ray::IDLE (pid 456) 40 %`` — the text rows and warnings use."""
    return ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpu_pct']:.0f} %" for p in competitors)
